"""How the egress proxy turns host names into addresses (outside the sandbox).

A resolver is ``(host, port) -> [(address, port)]``.  The default asks the
host's resolver; :func:`static_resolver` pins names to addresses, like curl's
``--resolve`` (tests point ``allowed.test`` at loopback servers with it).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence

Resolver = Callable[[str, int], Sequence[tuple[str, int]]]


def default_resolver(host: str, port: int) -> list[tuple[str, int]]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[tuple[str, int]] = []
    for _fam, _t, _p, _c, sa in infos:
        if (sa[0], port) not in out:
            out.append((str(sa[0]), port))
    return out


def static_resolver(table: dict[str, str | tuple[str, int]]) -> Resolver:
    """A resolver that knows only ``table``: ``{"allowed.test": ("127.0.0.1", 8443)}``
    (a bare address keeps the requested port).  Like curl's ``--resolve``:
    for tests, and for pinning names to addresses."""
    pinned = {k.lower(): v for k, v in table.items()}

    def resolve(host: str, port: int) -> list[tuple[str, int]]:
        hit = pinned.get(f"{host.lower()}:{port}", pinned.get(host.lower()))
        if hit is None:
            raise OSError(f"{host}: not in the resolver's table")
        return [hit] if isinstance(hit, tuple) else [(hit, port)]

    return resolve
