"""sandbox.denied events derived from the failures the sandbox caused."""

from __future__ import annotations

from pathlib import Path

from spyglass.events import Event
from spyglass.sandbox import bwrap as bw
from spyglass.sandbox.denials import DenialDeriver
from spyglass.sandbox.pathmap import PathMap


def deriver(tmp_path: Path) -> tuple[DenialDeriver, str]:
    home = tmp_path / "home"
    (home / ".cargo").mkdir(parents=True)
    (home / ".cargo" / "env").write_text("x")
    hidden = tmp_path / "ws" / "hidden.txt"
    hidden.parent.mkdir()
    hidden.write_text("h")
    mounts = bw.plan_mounts(
        workspace=[str(tmp_path / "ws")],
        real_home=str(home),
        decoy_home="/runs/r/home",
        private_tmp="/runs/r/tmp",
        hidden=[str(hidden)],
    )
    return DenialDeriver(PathMap(mounts)), str(home)


def fail(t: str, errno: str, **kw: object) -> Event:
    return Event(type=t, pid=42, ok=False, errno=errno, syscall="openat", **kw)  # type: ignore[arg-type]


def test_each_kind_of_refusal(tmp_path: Path) -> None:
    d, home = deriver(tmp_path)
    ro = d.derive(fail("file.create", "EROFS", path="/tmp/x/../../etc/x"))
    assert ro is not None and (ro.type, ro.reason, ro.pid, ro.errno, ro.detail) == (
        "sandbox.denied",
        "read-only",
        42,
        "EROFS",
        "file.create",
    )
    assert d.derive(fail("file.create", "EROFS", path="/tmp/y")).path == "/runs/r/tmp/y"  # type: ignore[union-attr]
    masked = d.derive(fail("file.read", "EACCES", path=str(tmp_path / "ws" / "hidden.txt")))
    assert masked is not None and masked.reason == "hidden"
    gone = d.derive(fail("file.read", "ENOENT", path=f"{home}/.cargo/env"))
    assert gone is not None and (gone.reason, gone.path) == ("hidden", f"{home}/.cargo/env")  # the real file
    assert d.derive(fail("file.read", "ENOENT", path=f"{home}/.cargo/env")) is None  # once per path
    assert (
        d.derive(fail("file.read", "ENOENT", path=f"{home}/.nothing-here")) is None
    )  # missing on the host too
    net = d.derive(
        Event(type="net.connect", pid=7, ok=False, errno="ENETUNREACH", address="198.51.100.7", port=80)
    )
    assert net is not None and (net.reason, net.address, net.port) == ("no-route", "198.51.100.7", 80)
    uring = d.derive(Event(type="sys.sensitive", pid=7, ok=False, errno="EPERM", syscall="io_uring_setup"))
    assert uring is not None and uring.reason == "io_uring"
    assert d.counts == {"read-only": 2, "hidden": 2, "no-route": 1, "io_uring": 1}


def test_ordinary_failures_are_not_denials(tmp_path: Path) -> None:
    d, _home = deriver(tmp_path)
    assert d.derive(fail("file.read", "ENOENT", path="/usr/lib/locale/C.UTF-8/LC_CTYPE")) is None
    assert d.derive(fail("file.read", "EACCES", path="/etc/shadow")) is None
    assert d.derive(Event(type="file.read", pid=1, path="/etc/passwd")) is None
    assert (
        d.derive(Event(type="net.connect", pid=1, ok=False, errno="ECONNREFUSED", address="127.0.0.1"))
        is None
    )
