"""Mount plan, bwrap argv, and mapping the sandbox's paths back to the host."""

from __future__ import annotations

import base64
from pathlib import Path

from spyglass.events import Event
from spyglass.sandbox import bwrap as bw
from spyglass.sandbox.pathmap import PathMap


def plan(tmp_path: Path, **kw: object) -> list[bw.Mount]:
    home = tmp_path / "realhome"
    (home / ".codex").mkdir(parents=True)
    (home / ".ssh").mkdir()
    ws = tmp_path / "ws"
    (ws / "secret").mkdir(parents=True)
    (ws / "token.txt").write_text("t")
    args: dict[str, object] = dict(
        workspace=[str(ws)],
        real_home=str(home),
        decoy_home="/runs/r1/home",
        private_tmp="/runs/r1/tmp",
        private_var_tmp="/runs/r1/var-tmp",
        pass_home=["~/.codex", "~/.missing", "/etc"],
        hidden=[str(ws / "secret"), str(ws / "token.txt")],
        relay_script="/runs/r1/relay.py",
        proxy_socket="/tmp/sg/proxy.sock",
    )
    args.update(kw)
    return bw.plan_mounts(**args)  # type: ignore[arg-type]


def test_argv_has_the_isolation_flags_and_mounts_in_order(tmp_path: Path) -> None:
    mounts = plan(tmp_path)
    argv = bw.build_argv(mounts, bw.SandboxOptions(cwd=str(tmp_path / "ws"), seccomp_fd=3, info_fd=4))
    for flag in (
        "--unshare-user",
        "--disable-userns",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--seccomp",
        "--info-fd",
    ):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[1:].index("--ro-bind") < argv.index("--bind")  # the root first, then what covers it
    home = str(tmp_path / "realhome")
    assert argv[argv.index("/runs/r1/home") + 1] == home
    assert f"{home}/.codex" in argv and f"{home}/.missing" not in argv and "--ro-bind-try" in argv
    ws_bind = argv.index(str(tmp_path / "ws"))
    assert argv.index("/runs/r1/tmp") < ws_bind  # a workspace under /tmp shows through the private /tmp
    assert argv.index("/runs/r1/tmp") < argv.index("/runs/r1/home")  # so does a home under /tmp
    hidden_dir = argv.index(str(tmp_path / "ws" / "secret"))
    assert argv[hidden_dir - 1] == "--tmpfs" and ws_bind < hidden_dir
    assert argv[argv.index(str(tmp_path / "ws" / "token.txt")) - 1] == "/dev/null"
    assert argv[-3:] == ["--chdir", str(tmp_path / "ws"), "--"]
    # hidden trees are made read-only after everything inside them is mounted
    assert argv.index("--remount-ro") > argv.index("/run/spyglass/proxy.sock")


def test_paths_map_back_to_the_host(tmp_path: Path) -> None:
    pm = PathMap(plan(tmp_path))
    home = str(tmp_path / "realhome")
    assert pm.to_host(f"{home}/.ssh/id_rsa") == "/runs/r1/home/.ssh/id_rsa"
    assert pm.to_host(home) == "/runs/r1/home"
    assert pm.to_host(f"{home}/.codex/config.toml") == f"{home}/.codex/config.toml"  # passed through
    assert pm.to_host("/tmp/build/x.o") == "/runs/r1/tmp/build/x.o"
    assert pm.to_host("/var/tmp/y") == "/runs/r1/var-tmp/y"
    assert pm.to_host(str(tmp_path / "ws" / "a.py")) == str(tmp_path / "ws" / "a.py")
    assert pm.to_host("/etc/passwd") == "/etc/passwd"
    assert pm.to_host("/run/spyglass/relay.py") == "/runs/r1/relay.py"
    assert pm.to_host("/run/dbus/system_bus_socket") == "/run/dbus/system_bus_socket"  # hidden: as written
    assert pm.to_host("relative/path") == "relative/path"
    assert pm.to_sandbox("/runs/r1/home/.aws/credentials") == f"{home}/.aws/credentials"


def test_events_are_rewritten_and_keep_the_sandbox_spelling(tmp_path: Path) -> None:
    pm = PathMap(plan(tmp_path))
    home = str(tmp_path / "realhome")
    ev = Event(type="file.read", pid=5, path=f"{home}/.aws/credentials")
    pm.map_event(ev)
    assert (ev.path, ev.raw_path) == ("/runs/r1/home/.aws/credentials", f"{home}/.aws/credentials")
    ev = Event(type="file.rename", pid=5, path="/tmp/a", raw_path="a", target="/tmp/b", cwd="/tmp")
    pm.map_event(ev)
    assert (ev.path, ev.raw_path, ev.target, ev.cwd) == (
        "/runs/r1/tmp/a",
        "a",
        "/runs/r1/tmp/b",
        "/runs/r1/tmp",
    )
    raw = b"/tmp/caf\xe9"
    ev = Event(
        type="file.create",
        pid=5,
        path="/tmp/caf\\xe9",
        raw_bytes={"file.path": base64.b64encode(raw).decode()},
    )
    pm.map_event(ev)
    assert base64.b64decode(ev.raw_bytes["file.path"]) == b"/runs/r1/tmp/caf\xe9"  # type: ignore[index]


def test_sockets_outside_hidden_trees_are_masked(tmp_path: Path) -> None:
    sock = tmp_path / "ws2" / "agent.sock"
    sock.parent.mkdir()
    sock.write_text("")
    outside = Path("/etc/hostname")  # stands for a socket under the read-only root
    mounts = plan(tmp_path, hide_sockets=[str(sock), str(outside), "/run/docker.sock"])
    masked = {m.dest for m in mounts if m.role == "hidden-socket"}
    assert str(outside) in masked and "/run/docker.sock" not in masked


def test_host_unix_sockets_reads_proc_net_unix(tmp_path: Path) -> None:
    f = tmp_path / "unix"
    f.write_text(
        "Num RefCount Protocol Flags Type St Inode Path\n"
        "0: 00000002 00000000 00010000 0001 01 100 /run/docker.sock\n"
        "0: 00000002 00000000 00010000 0001 01 101 @abstract\n"
        "0: 00000002 00000000 00010000 0001 01 102\n"
    )
    assert bw.host_unix_sockets(str(f)) == ["/run/docker.sock"]
