"""The agent forges spyglass's own byte-code, so that its code runs in the next spyglass.

Writes to spyglass's ``__pycache__`` raise no alert (any Python process of the run that imports
spyglass writes there), so the guard removes what the run wrote there when the run ends
(docs/threat-model.md).  The attack is played for real: a Python process of the run writes a
``termcolor`` byte-code file with the source's size and time in its header, whose code leaves a
marker before doing what the module does; the next ``spyglass`` command must not leave it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

import spyglass.termcolor

SOURCE = Path(spyglass.termcolor.__file__).resolve()
CACHED = Path(importlib.util.cache_from_source(str(SOURCE)))


@pytest.fixture(autouse=True)
def _pycache_exists() -> None:
    """spyglass's ``__pycache__`` exists, as the first import makes it (not made when the tests'
    environment sets PYTHONDONTWRITEBYTECODE): the attacks write into it."""
    CACHED.parent.mkdir(exist_ok=True)

FORGE = r"""
import importlib._bootstrap_external as be, marshal, os, sys
src, cached, marker, via = sys.argv[1:5]
st = os.stat(src)
evil = f"open({marker!r}, 'w').write('ran')\nexec(compile(open({src!r}).read(), {src!r}, 'exec'))\n"
data = be._code_to_timestamp_pyc(compile(evil, src, "exec"), st.st_mtime, st.st_size)
if via == "rename":  # written elsewhere, then moved in (importlib's own way of writing it)
    tmp = os.path.join(os.environ["TMPDIR"], "t.pyc")
    open(tmp, "wb").write(data)
    os.replace(tmp, cached)
else:
    open(cached, "wb").write(data)
"""


def _forge(setup: Any, via: str) -> tuple[Any, Path]:
    marker = setup.ws.parent / "marker"
    script = setup.ws.parent / "forge.py"
    script.write_text(FORGE)
    tmp = setup.ws.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    setup.env["TMPDIR"] = str(tmp)
    try:
        res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                             setup.python, str(script), str(SOURCE), str(CACHED), str(marker), via)
        assert res.returncode == 0, res.stderr
        return res, marker
    except BaseException:
        CACHED.unlink(missing_ok=True)  # never leave a forged module for the tests that follow
        raise


def _own_bytecode(setup: Any) -> dict[str, Any]:
    (run,) = (setup.store / "runs").iterdir()
    meta = json.loads((run / "run.json").read_text())
    found: dict[str, Any] = meta.get("extra", {}).get("own_bytecode", {})
    return found


def _next_spyglass_runs_clean(setup: Any, marker: Path) -> None:
    try:
        res = setup.spyglass("ls", "--store", str(setup.store))  # imports spyglass.termcolor
        assert res.returncode == 0, res.stderr
        assert not marker.exists(), "the forged byte-code ran in the next spyglass"
    finally:
        if marker.exists():
            CACHED.unlink(missing_ok=True)


def test_the_forgery_runs_in_the_next_spyglass_when_nothing_removes_it(setup: Any) -> None:
    """The control: forged outside any run, the byte-code is what the next spyglass runs."""
    import subprocess

    marker = setup.ws.parent / "marker"
    script = setup.ws.parent / "forge.py"
    script.write_text(FORGE)
    try:
        subprocess.run([setup.python, str(script), str(SOURCE), str(CACHED), str(marker), "write"], check=True,
                       env=setup.env, timeout=60)
        res = setup.spyglass("ls", "--store", str(setup.store))
        assert res.returncode == 0, res.stderr
        assert marker.read_text() == "ran"
    finally:
        CACHED.unlink(missing_ok=True)


def test_forged_byte_code_written_in_place_is_removed_at_the_end_of_the_run(setup: Any) -> None:
    res, marker = _forge(setup, "write")
    assert not marker.exists()  # nothing of the run imported it
    facts = _own_bytecode(setup)
    assert facts.get("removed") == [str(CACHED)] and facts.get("failed") == [], facts
    _next_spyglass_runs_clean(setup, marker)
    assert "witness-tamper" not in res.stderr


def test_forged_byte_code_moved_in_is_removed_at_the_end_of_the_run(setup: Any) -> None:
    _, marker = _forge(setup, "rename")
    facts = _own_bytecode(setup)
    assert str(CACHED) in facts.get("removed", []), facts  # the name it was moved to (and its temporary one)
    _next_spyglass_runs_clean(setup, marker)


def test_benign_twin_byte_code_of_the_workspace_stays(setup: Any) -> None:
    """The agent's own byte-code (its workspace's ``__pycache__``) is the agent's: left alone,
    and the run records nothing of spyglass's."""
    (setup.ws / "mod.py").write_text("X = 1\n")
    res = setup.run(f"{setup.python} -m py_compile mod.py && ls __pycache__ > listed.txt")
    assert res.returncode == 0, res.stderr
    kept = list((setup.ws / "__pycache__").glob("mod.*.pyc"))
    assert kept and (setup.ws / "listed.txt").read_text().strip(), res.stderr
    assert _own_bytecode(setup) == {}
    assert "witness" not in res.stderr, res.stderr
    assert os.path.exists(kept[0])


def test_benign_twin_byte_code_spyglass_writes_before_the_run_starts_stays(setup: Any) -> None:
    """Spyglass's own imports for the run (its sinks, the capture's protected files) write their
    byte-code before the agent starts: it is as at the start when the run ends, and stays (were
    it removed, every run would compile those modules again)."""
    import spyglass.witness.identities as late  # imported by the run when it tells the capture

    cached = Path(importlib.util.cache_from_source(str(Path(late.__file__).resolve())))
    cached.unlink(missing_ok=True)
    env = {k: v for k, v in setup.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--", "true", env=env)
    assert res.returncode == 0, res.stderr
    assert cached.exists()
    assert str(cached) not in _own_bytecode(setup).get("removed", []), _own_bytecode(setup)


ASIDE = r"""
import os, shutil, sys
own_cache, forged, how = sys.argv[1:4]
evil = os.path.join(os.environ["TMPDIR"], "evil")
os.makedirs(evil)
shutil.copy(forged, os.path.join(evil, os.path.basename(forged)))
if how == "link-dir":  # the forged file written through a symlink to the directory, the link then gone
    link = os.path.join(os.environ["TMPDIR"], "lnk")
    os.symlink(own_cache, link)
    shutil.copy(forged, os.path.join(link, os.path.basename(forged)))
    os.unlink(link)
else:
    os.rename(own_cache, own_cache + ".aside")
    if how == "moved-in":  # a directory of forged files takes the place of __pycache__
        os.rename(evil, own_cache)
    else:  # "symlink": __pycache__ becomes a symlink to it
        os.symlink(evil, own_cache)
"""


def _forged_file(tmp: Path, marker: Path) -> Path:
    """A forged ``termcolor`` byte-code file, made outside any run."""
    import subprocess
    import sys

    script = tmp / "forge.py"
    script.write_text(FORGE)
    out = tmp / "forged" / CACHED.name
    out.parent.mkdir()
    subprocess.run([sys.executable, str(script), str(SOURCE), str(out), str(marker), "write"], check=True,
                   timeout=60, env={**os.environ, "TMPDIR": str(tmp)})
    return out


@pytest.mark.parametrize("how", ["link-dir", "moved-in", "symlink"])
def test_byte_code_put_in_place_another_way_is_removed_too(setup: Any, how: str) -> None:
    """The forged file reached through a symlink to the directory (both backends record the file's
    real path: a write in ``__pycache__``, no alert), a directory of forged files moved in place of
    ``__pycache__``, or ``__pycache__`` made a symlink (each a ``witness-tamper`` alert: a change
    to spyglass's own source): the forgery is gone when the run ends."""
    import shutil

    marker = setup.ws.parent / "marker"
    forged = _forged_file(setup.ws.parent, marker)
    tmp = setup.ws.parent / "tmp"
    tmp.mkdir()
    setup.env["TMPDIR"] = str(tmp)
    script = setup.ws.parent / "aside.py"
    script.write_text(ASIDE)
    aside = Path(str(CACHED.parent) + ".aside")
    try:
        res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                             setup.python, str(script), str(CACHED.parent), str(forged), how)
        assert res.returncode == 0, res.stderr
        assert ("witness-tamper" in res.stderr) == (how != "link-dir"), res.stderr
        facts = _own_bytecode(setup)
        assert facts.get("removed") and not facts.get("failed"), facts
        assert not CACHED.exists() and not CACHED.parent.is_symlink()
        _next_spyglass_runs_clean(setup, marker)
    finally:
        if CACHED.parent.is_symlink():
            CACHED.parent.unlink()
        CACHED.unlink(missing_ok=True)
        if aside.exists():
            if CACHED.parent.exists():
                shutil.rmtree(aside)
            else:
                aside.rename(CACHED.parent)


SOURCE_VIA_CACHE = r"""
import os, sys
src, how, marker = sys.argv[1:4]
own = os.path.dirname(src)
if how.startswith("in-cache"):  # a symlink in spyglass's own __pycache__ to the source
    link = os.path.join(own, "__pycache__", "l.py")
    os.symlink(os.path.join("..", os.path.basename(src)), link)
    name = link
else:  # a directory called __pycache__ elsewhere: a symlink to spyglass's own package
    link = os.path.join(os.environ["TMPDIR"], "__pycache__")
    os.symlink(own, link)
    name = os.path.join(link, os.path.basename(src))
changed = open(src).read() + f"\nopen({marker!r}, 'w').write('ran')\n"
if how.startswith("renamed"):  # a changed copy moved over the source through the symlink
    tmp = os.path.join(os.environ["TMPDIR"], "new.py")
    open(tmp, "w").write(changed)
    os.rename(tmp, name)
else:
    with open(name, "w") as f:
        f.write(changed)
if how.endswith("-gone"):  # the link removed at once: nothing left to resolve when the event is read
    os.unlink(link)
"""


@pytest.mark.parametrize("how", ["in-cache", "in-cache-gone", "elsewhere", "elsewhere-gone", "renamed-gone"])
def test_source_written_through_a_name_in_a_pycache_is_a_tamper(setup: Any, how: str) -> None:
    """Spyglass's own source written through a name that says ``/__pycache__/`` (a symlink in its
    ``__pycache__`` to the source, or a symlink called ``__pycache__`` to its package; a changed
    copy moved over it through that symlink, removed at once) is a change to its source
    (``witness-tamper``), not a write of byte-code: the guard removes the name at the end, not
    the change, and the next spyglass runs the changed source."""
    marker = setup.ws.parent / "marker"
    tmp = setup.ws.parent / "tmp"
    tmp.mkdir()
    setup.env["TMPDIR"] = str(tmp)
    script = setup.ws.parent / "via_cache.py"
    script.write_text(SOURCE_VIA_CACHE)
    CACHED.parent.mkdir(exist_ok=True)
    before, st = SOURCE.read_bytes(), SOURCE.stat()
    try:
        res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                             setup.python, str(script), str(SOURCE), how, str(marker))
        assert res.returncode == 0, res.stderr
        assert SOURCE.read_bytes() != before  # the attack did change the source
        assert "witness-tamper" in res.stderr, res.stderr
    finally:
        if SOURCE.read_bytes() != before:  # put the source back as it was (size and time: its byte-code stays valid)
            SOURCE.write_bytes(before)
            os.utime(SOURCE, ns=(st.st_atime_ns, st.st_mtime_ns))
        (CACHED.parent / "l.py").unlink(missing_ok=True)


DIR_IN_PLACE = r"""
import os, sys
cached, how = sys.argv[1:3]
if os.path.lexists(cached):
    os.unlink(cached)
os.mkdir(cached)
if how == "full":  # not empty: a plain rmdir cannot remove it
    os.mkdir(os.path.join(cached, "d"))
    open(os.path.join(cached, "d", "f"), "w").write("x")
"""


@pytest.mark.parametrize("how", ["empty", "full"])
def test_a_directory_in_place_of_byte_code_is_removed_too(setup: Any, how: str) -> None:
    """A directory in the place of a byte-code file makes Python compile that module again at every
    start of every later spyglass (it can neither read nor write its cache): it goes at the end of
    the run like a file."""
    import shutil

    script = setup.ws.parent / "dir_in_place.py"
    script.write_text(DIR_IN_PLACE)
    CACHED.parent.mkdir(exist_ok=True)
    try:
        res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                             setup.python, str(script), str(CACHED), how)
        assert res.returncode == 0, res.stderr
        facts = _own_bytecode(setup)
        assert not CACHED.is_dir(), facts
        assert facts.get("failed") == [], facts
    finally:
        if CACHED.is_dir() and not CACHED.is_symlink():
            shutil.rmtree(CACHED)
        for aside in CACHED.parent.glob(".*"):
            shutil.rmtree(aside) if aside.is_dir() else aside.unlink()


def test_benign_twin_a_python_of_the_run_caches_spyglass_where_it_had_no_cache(setup: Any, tmp_path: Path) -> None:
    """A Python process of the run that imports a subpackage of spyglass whose ``__pycache__`` is
    not there yet (an install without byte-code) makes that directory and writes there: no alert
    (spyglass's source is not changed), and what it wrote goes at the end of the run."""
    import shutil

    pkg = SOURCE.parent / "bench"
    cache = pkg / "__pycache__"
    aside = tmp_path / "cache-aside"
    if cache.exists():
        shutil.move(str(cache), aside)
    env = {k: v for k, v in setup.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    try:
        res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                             setup.python, "-c", "import spyglass.bench", env=env)
        assert res.returncode == 0, res.stderr
        assert "witness" not in res.stderr, res.stderr
        (run,) = (setup.store / "runs").iterdir()
        extra = json.loads((run / "run.json").read_text()).get("extra", {})
        assert "own_source_changed" not in extra, extra
        assert any(p.startswith(str(cache) + "/") for p in extra["own_bytecode"]["removed"]), extra
    finally:
        if cache.exists():
            shutil.rmtree(cache)
        if aside.exists():
            shutil.move(str(aside), cache)


MOUNT = r"""
import ctypes, fcntl, os, struct, sys
how, source, target = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *a):
    r = libc.syscall(nr, *a)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
if how == "bind":  # the user's files, their status change time now, bound on spyglass's __pycache__
    for f in os.listdir(source):
        os.utime(os.path.join(source, f))
    tree = sc(428, -100, source.encode(), 1 | 0o2000000)  # open_tree(OPEN_TREE_CLONE | O_CLOEXEC)
else:  # "image": an ext4 image whose byte-code files say they last changed in 2020, read-only
    ctl = os.open("/dev/loop-control", os.O_RDWR)
    dev = f"/dev/loop{fcntl.ioctl(ctl, 0x4C82)}"  # LOOP_CTL_GET_FREE
    loop, img = os.open(dev, os.O_RDWR), os.open(source, os.O_RDONLY)
    fcntl.ioctl(loop, 0x4C00, img)  # LOOP_SET_FD
    info = bytearray(232)
    struct.pack_into("I", info, 52, 5)  # lo_flags: LO_FLAGS_AUTOCLEAR | LO_FLAGS_READ_ONLY
    fcntl.ioctl(loop, 0x4C04, bytes(info))  # LOOP_SET_STATUS64
    fs = sc(430, b"ext4", 1)  # fsopen
    sc(431, fs, 1, b"source", dev.encode(), 0)  # fsconfig(FSCONFIG_SET_STRING)
    sc(431, fs, 0, b"ro", None, 0)  # fsconfig(FSCONFIG_SET_FLAG)
    sc(431, fs, 6, None, None, 0)  # fsconfig(FSCONFIG_CMD_CREATE)
    tree = sc(432, fs, 1, 1)  # fsmount(FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY)
sc(429, tree, b"", -100, target.encode(), 4)  # move_mount(MOVE_MOUNT_F_EMPTY_PATH): no mount(2)
"""


def _unmount(path: Path) -> None:
    """Every mount left on ``path`` (stacked ones too) detached: never a mount left behind."""
    import subprocess

    for _ in range(16):
        if subprocess.run(["umount", "-l", str(path)], check=False, timeout=60, capture_output=True).returncode:
            return


def _mount_run(setup: Any, how: str, source: Path) -> Any:
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    script = setup.ws.parent / "mount.py"
    script.write_text(MOUNT)
    CACHED.parent.mkdir(exist_ok=True)
    res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                         setup.python, str(script), how, str(source), str(CACHED.parent))
    assert res.returncode == 0, res.stderr
    return res


def test_the_users_files_bound_on_the_pycache_are_not_removed(setup: Any) -> None:
    """The user's directory bind-mounted on spyglass's ``__pycache__`` (``open_tree`` and
    ``move_mount``: no ``mount`` call), its files touched first: the end of the run removes
    nothing of it (it is not spyglass's), detaches the mount and says so (``witness-tamper``)."""
    victim = setup.ws.parent / "thesis"
    victim.mkdir()
    (victim / "thesis.tex").write_text("precious\n")
    try:
        res = _mount_run(setup, "bind", victim)
        assert (victim / "thesis.tex").read_text() == "precious\n", _own_bytecode(setup)
        assert "witness-tamper" in res.stderr, res.stderr
        (run,) = (setup.store / "runs").iterdir()
        extra = json.loads((run / "run.json").read_text()).get("extra", {})
        assert any("mounted" in s for s in extra.get("own_source_changed", [])), extra
    finally:
        _unmount(CACHED.parent)


def test_byte_code_on_a_file_system_mounted_on_the_pycache_does_not_run(setup: Any) -> None:
    """A read-only ext4 image mounted on spyglass's ``__pycache__`` (no ``mount`` call) whose forged
    byte-code says it last changed in 2020 (set with debugfs before): neither the run's events nor
    the status change time find it; the mount itself is what the end of the run finds."""
    import shutil
    import subprocess

    if not (shutil.which("mkfs.ext4") and shutil.which("debugfs")) or not os.path.exists("/dev/loop-control"):
        pytest.skip("needs mkfs.ext4, debugfs and loop devices")
    marker = setup.ws.parent / "marker"
    forged = _forged_file(setup.ws.parent, marker)
    img = setup.ws.parent / "img"
    subprocess.run(["mkfs.ext4", "-q", "-d", str(forged.parent), str(img), "2M"], check=True, timeout=60)
    subprocess.run(["debugfs", "-w", "-R", f"sif /{forged.name} ctime 20200101000000", str(img)],
                   check=True, timeout=60, capture_output=True)
    try:
        res = _mount_run(setup, "image", img)
        assert "witness-tamper" in res.stderr, res.stderr
        _next_spyglass_runs_clean(setup, marker)
    finally:
        _unmount(CACHED.parent)


def test_a_copy_of_spyglass_mounted_on_its_package_is_detached(setup: Any) -> None:
    """A changed copy of the whole package bind-mounted on spyglass's own package (no ``mount``
    call): the next spyglass would run the copy; the end of the run detaches it and says so."""
    import shutil

    marker = setup.ws.parent / "marker"
    fake = setup.ws.parent / "fake"
    shutil.copytree(SOURCE.parent, fake, ignore=shutil.ignore_patterns("__pycache__"))
    with open(fake / SOURCE.name, "a") as f:
        f.write(f"\nopen({str(marker)!r}, 'w').write('ran')\n")
    try:
        if os.geteuid() != 0:
            pytest.skip("mounting needs root")
        script = setup.ws.parent / "mount.py"
        script.write_text(MOUNT)
        res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                             setup.python, str(script), "bind", str(fake), str(SOURCE.parent))
        assert res.returncode == 0, res.stderr
        assert "witness-tamper" in res.stderr, res.stderr
        _next_spyglass_runs_clean(setup, marker)
    finally:
        _unmount(SOURCE.parent)
