"""A file below an overlay mount whose stat is not its content's: the hashes kept by stat.

With ``metacopy=on`` a chmod copies only a file's metadata up: the overlay then reports the upper
inode's stat (device, inode, size, mtime, ctime, mode) and reads the content from the lower file.
The lower file can be rewritten (while the overlay is unmounted) and the overlay mounted again with
the same anonymous device number: every number of the stat is as it was, the content is not.  So
no hash is kept by stat for files on an overlay (spyglass/evidence/hashmemo.py): the attacker
(root, a real process) does it between two runs and within one, under a real ``spyglass run``;
the evidence shows the content the file really has.  The benign twin (the same overlay, nothing
changed) is silent."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spyglass.evidence.manifest import decode_manifest
from spyglass.evidence.workspace import load_workspace_changes
from spyglass.store import RunReader, Store

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting an overlay needs root")

GOOD, EVIL = b"good\n", b"evil\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Overlay:
    def __init__(self, base: Path) -> None:
        self.lower, self.upper, self.work = base / "lower", base / "upper", base / "work"
        self.ws = base / "ws"
        self.mnt = self.ws / "m"
        for d in (self.lower, self.upper, self.work, self.mnt):
            d.mkdir(parents=True)
        (self.lower / "f").write_bytes(GOOD)
        self.opts = f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work},metacopy=on"

    def mount_cmd(self) -> str:
        return f"mount -t overlay overlay -o {self.opts} {self.mnt}"

    def swap_cmd(self) -> str:
        """Unmount, rewrite the lower file (same size), mount again: the overlay file's stat is unchanged."""
        return f"umount {self.mnt} && printf 'evil\\n' > {self.lower}/f && {self.mount_cmd()}"


@pytest.fixture
def overlay(tmp_path: Path) -> Iterator[Overlay]:
    ov = Overlay(tmp_path)
    if subprocess.run(ov.mount_cmd(), shell=True, check=False, capture_output=True).returncode:
        pytest.skip("cannot mount an overlay with metacopy=on here")
    try:
        os.chmod(ov.mnt / "f", 0o600)  # a metadata-only copy up: the content stays in the lower file
        newest = os.stat(ov.mnt / "f").st_ctime_ns
        deadline = time.monotonic() + 30
        while time.time_ns() <= newest + 2_100_000_000:  # settled for spyglass run's racy margin
            assert time.monotonic() < deadline, "the clock does not move"
            time.sleep(0.05)
        yield ov
    finally:
        subprocess.run(["umount", "-l", str(ov.mnt)], check=False, capture_output=True)


def _spyglass(store: Path, ws: Path, backend: str, *cmd: str) -> None:
    env = {**os.environ, "SPYGLASS_STORE": str(store), "HOME": str(ws.parent / "home")}
    env.pop("SPYGLASS_POLICY", None)
    (ws.parent / "home").mkdir(exist_ok=True)
    res = subprocess.run([sys.executable, "-m", "spyglass", "run", "-q", "--backend", backend, "--", *cmd],
                         cwd=ws, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert res.returncode == 0, res.stderr


def _latest(store: Path) -> Path:
    s = Store(store)
    return s.run_dir(RunReader(s, s.resolve("latest")).meta.id)


def _hashes(run_dir: Path, name: str) -> dict[str, str | None]:
    m = decode_manifest((run_dir / "evidence" / name).read_bytes())
    return {Path(f.path).name: f.sha256 for f in m.files}


def test_an_overlay_file_rewritten_below_between_runs_is_read_again(overlay: Overlay, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _spyglass(store, overlay.ws, "auto", "true")
    before = os.stat(overlay.mnt / "f")
    subprocess.run(overlay.swap_cmd(), shell=True, check=True)  # outside any run
    after = os.stat(overlay.mnt / "f")
    if (after.st_dev, after.st_ino, after.st_ctime_ns) != (before.st_dev, before.st_ino, before.st_ctime_ns):
        pytest.skip("the overlay came back with another device number: no stat to forge here")
    assert (overlay.mnt / "f").read_bytes() == EVIL
    _spyglass(store, overlay.ws, "auto", "true")
    assert _hashes(_latest(store), "manifest-before.json")["f"] == _sha(EVIL)


@pytest.mark.parametrize("changed", [True, False], ids=["attack", "benign"])
def test_an_overlay_file_rewritten_below_during_a_run_is_in_its_diff(
    overlay: Overlay, tmp_path: Path, capture_backend: str, changed: bool
) -> None:
    store = tmp_path / "store"
    _spyglass(store, overlay.ws, capture_backend, "sh", "-c", overlay.swap_cmd() if changed else "cat m/f")
    run_dir = _latest(store)
    assert (overlay.mnt / "f").read_bytes() == (EVIL if changed else GOOD)
    assert _hashes(run_dir, "manifest-after.json")["f"] == _sha(EVIL if changed else GOOD)
    ch = load_workspace_changes(run_dir)
    assert ch is not None
    assert [c.path for c in ch.modified] == (["m/f"] if changed else [])
