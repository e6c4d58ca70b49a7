"""Device nodes: paths under /dev that name no stored file.

``/dev/null``, ``/dev/zero``, ``/dev/tty``, ``/dev/urandom``, ``/dev/pts/3``,
``/dev/fd/1`` ... are character devices (or links to descriptors): writing one
stores nothing and reading one yields nothing a run wrote, so they are never
where a secret goes nor where one comes from, and never "files written".
``/dev/shm`` and ``/dev/mqueue`` are file systems whose files are real files.
"""

from __future__ import annotations

import re

_DEVICE = re.compile(r"^/dev/(?!(?:shm|mqueue)(?:/|$))[^\x00]+$")


def is_device_path(path: str | None) -> bool:
    """``path`` names a device node under /dev (not a file in /dev/shm or /dev/mqueue)."""
    return path is not None and _DEVICE.match(path) is not None
