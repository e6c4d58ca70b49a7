"""codex checks at start-up that its bubblewrap sandbox works (`bwrap --unshare-user --unshare-net
--ro-bind / / /bin/true`): that probe stays silent; bubblewrap or unshare doing anything more still
raises sys-namespace-change (both backends, real bwrap)."""

from __future__ import annotations

import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

PROBE = "bwrap --unshare-user --unshare-net --ro-bind / / /bin/true"


def _ids(r: object) -> set[str]:
    return r.ids()  # type: ignore[attr-defined,no-any-return]


def test_codex_sandbox_probe_is_quiet(live: object, capture_backend: str) -> None:
    bwrap = shutil.which("bwrap")
    r = live(f"{PROBE} && {bwrap} --unshare-user --unshare-net --ro-bind / / /bin/true && echo ok",  # type: ignore[operator]
             backend=capture_backend)
    assert r.exit_code == 0  # type: ignore[attr-defined]
    assert not {"sys-namespace-change", "priv-capset"} & _ids(r), sorted(_ids(r))


@pytest.mark.parametrize("script", [
    "bwrap --unshare-user --unshare-net --ro-bind / / /bin/sh -c true",
    "bwrap --unshare-user --unshare-net --ro-bind / / --bind /tmp /mnt /bin/true",
    "bwrap --unshare-user --unshare-net --ro-bind / / /bin/true; unshare -r true",
], ids=["shell", "extra-bind", "unshare"])
def test_namespaces_beyond_the_probe_still_fire(live: object, capture_backend: str, script: str) -> None:
    if "unshare -r" in script and shutil.which("unshare") is None:
        pytest.skip("unshare not installed")
    r = live(script, backend=capture_backend)  # type: ignore[operator]
    assert "sys-namespace-change" in _ids(r), sorted(_ids(r))
