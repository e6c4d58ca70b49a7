"""Evasions of net-reverse-shell and persist-git-config that the narrowed patterns let through,
each a real process under a real run (both backends), with benign twins of the same words.

- netcat runs a program on the connection with ``-c CMD`` whatever CMD is (``-c 'exec sh'``), and
  with ``-e PROG`` whatever PROG is (``/usr/bin/env``, a program in the workspace); ncat also with
  ``--sh-exec``/``--exec``/``--lua-exec``.  Only lower-case ``-c``/``-e`` (``-C`` is CRLF), and only
  in netcat's own command (not a ``-c`` of a later command after ``;``/``&&``).
- git's dashed form ``git-config`` (``/usr/lib/git-core/git-config``, or any argv[0] so named) has
  no ``config`` argument; and keys that make git run a program: ``gpg.program``, ``core.gitProxy``,
  ``merge.NAME.driver``, ``diff.external``, ``sequence.editor``, ``pager.CMD``, ``init.templateDir``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NETCATS = ("nc", "ncat", "nc.openbsd", "nc.traditional")


def _ids(r: object) -> set[str]:
    return r.ids()  # type: ignore[attr-defined,no-any-return]


def _bin(tmp_path: Path) -> Path:
    """Netcats of our own that exit at once (the rule keys on the command line), made before the run."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in NETCATS:
        (bindir / name).write_text("#!/bin/sh\nexit 0\n")
        (bindir / name).chmod(0o755)
    return bindir


@pytest.mark.parametrize("args", [
    "127.0.0.1 9 -c 'exec sh'",
    "-c \"exec sh\" 127.0.0.1 9",
    "127.0.0.1 9 -e /usr/bin/env",
    "-e \"$WS/shell\" 127.0.0.1 9",
    "--sh-exec sh 127.0.0.1 9",
    "--exec=/bin/sh 127.0.0.1 9",
])
def test_netcat_running_any_program_on_the_connection_fires(live: object, capture_backend: str, tmp_path: Path,
                                                            args: str) -> None:
    bindir = _bin(tmp_path)
    for name in NETCATS:
        r = live(f'"{bindir}/{name}" {args}', workspace=tmp_path / f"ws-{name}", backend=capture_backend)  # type: ignore[operator]
        assert "net-reverse-shell" in _ids(r), (name, args, sorted(_ids(r)))


def test_benign_twin_netcat_without_a_program_to_run_is_quiet(live: object, capture_backend: str,
                                                              tmp_path: Path) -> None:
    bindir = _bin(tmp_path)
    r = live(  # type: ignore[operator]
        f'''
"{bindir}/nc" -C 127.0.0.1 9 < /dev/null
"{bindir}/nc" -zv 127.0.0.1 9; /bin/sh -c 'echo -e x' > /dev/null
"{bindir}/ncat" -w 1 127.0.0.1 9 && /bin/bash -c 'true'
"{bindir}/nc.openbsd" -N 127.0.0.1 9 < /dev/null
exit 0
''',
        workspace=tmp_path / "ws", backend=capture_backend,
    )  # fmt: skip
    assert "net-reverse-shell" not in _ids(r), sorted(_ids(r))


def _git_dashed() -> str:
    path = "/usr/lib/git-core/git-config"
    if shutil.which("git") is None or not os.path.exists(path):
        pytest.skip("git or its dashed git-config not installed")
    return path


def test_git_config_dashed_or_with_other_program_keys_fires(live: object, capture_backend: str,
                                                            tmp_path: Path) -> None:
    dashed = _git_dashed()
    for i, cmd in enumerate([
        f'{dashed} core.fsmonitor "$WS/evil.sh"',
        '"$PY" -c \'import os, shutil; os.execv(shutil.which("git"), ["git-config", "core.hooksPath", "/tmp/h"])\'',
        'git config gpg.program "$WS/evil.sh"',
        'git config core.gitProxy "$WS/evil.sh"',
        'git config merge.ours.driver "$WS/evil.sh %A"',
        'git config diff.external "$WS/evil.sh"',
        'git config --global init.templateDir "$WS/tpl"',
        'git config pager.log "$WS/evil.sh"',
    ]):
        r = live(  # type: ignore[operator]
            f'git init -q "$WS/repo" && cd "$WS/repo" || exit 1\n{cmd}\n',
            workspace=tmp_path / f"ws{i}", backend=capture_backend,
        )  # fmt: skip
        assert "persist-git-config" in _ids(r), (cmd, sorted(_ids(r)))


def test_benign_twin_git_config_dashed_reading_or_plain_keys_is_quiet(live: object, capture_backend: str,
                                                                      tmp_path: Path) -> None:
    dashed = _git_dashed()
    r = live(  # type: ignore[operator]
        f'''
git init -q "$WS/repo" && cd "$WS/repo" || exit 1
{dashed} user.name someone
{dashed} --get gpg.program > /dev/null
git config user.email someone@example.com
git config --get core.fsmonitor > /dev/null
git -c core.hooksPath=/dev/null -c core.fsmonitor= config user.name > /dev/null
exit 0
''',
        workspace=tmp_path / "ws", backend=capture_backend,
    )  # fmt: skip
    assert "persist-git-config" not in _ids(r), sorted(_ids(r))


PROBE_ARGS = "--unshare-user --unshare-net --ro-bind / / /bin/true"
#: a program named bwrap that is no bubblewrap: it makes a user namespace itself, whatever its arguments
FAKE_BWRAP = "#define _GNU_SOURCE\n#include <sched.h>\nint main(void) { return unshare(CLONE_NEWUSER) != 0; }\n"


def test_codex_s_probe_line_given_to_a_bwrap_that_is_not_the_system_s_fires(live: object, capture_backend: str,
                                                                          tmp_path: Path) -> None:
    """The exemption of codex's probe pins the system's bwrap: a binary named bwrap made before the
    run (not written by it, so its identity is its own name) is not exempt."""
    cc = shutil.which("cc") or shutil.which("clang") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src, fake = tmp_path / "fake.c", tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    src.write_text(FAKE_BWRAP)
    import subprocess
    subprocess.run([cc, "-o", str(fake), str(src)], check=True)
    r = live(f'"{fake}" {PROBE_ARGS}', workspace=tmp_path / "ws", backend=capture_backend)  # type: ignore[operator]
    assert "sys-namespace-change" in _ids(r), sorted(_ids(r))


#: ``python -c CONNECTOR PORT ARGV...``: connects to 127.0.0.1:PORT and runs ARGV with the socket as its stdio
CONNECTOR = """
import socket, subprocess, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
subprocess.call(sys.argv[2:], stdin=s, stdout=s, stderr=s)
"""


@pytest.mark.parametrize("shell", [["sh", "-s"], ["sh", "-"], ["bash", "--norc"], ["dash", "-e"],
                                   ["bash", "-o", "posix"]])
def test_a_shell_reading_a_loopback_connection_with_options_fires(live: object, capture_backend: str,
                                                                  tmp_path: Path, shell: list[str]) -> None:
    """A real reverse shell to a listener on 127.0.0.1 (this test's): the shell has options, but no
    command, so its commands come from the connection (``id`` here, its answer read back)."""
    import socket
    import threading

    if shutil.which(shell[0]) is None:
        pytest.skip(f"{shell[0]} not installed")
    srv = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"echo got-$((6*7))\nexit\n")
            conn.settimeout(30)
            got.append(conn.recv(100))

    t = threading.Thread(target=serve)
    t.start()
    (tmp_path / "connector.py").write_text(CONNECTOR)
    args = " ".join(shell)
    r = live(f'"$PY" {tmp_path}/connector.py {srv.getsockname()[1]} {args}',  # type: ignore[operator]
             workspace=tmp_path / "ws", backend=capture_backend)
    t.join(60)
    srv.close()
    assert got and b"got-42" in got[0], got
    assert "net-shell-after-connect" in _ids(r), (args, sorted(_ids(r)))


def test_benign_twin_a_shell_with_a_command_or_script_after_a_loopback_connection_is_quiet(
        live: object, capture_backend: str, tmp_path: Path) -> None:
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.close()

    t = threading.Thread(target=serve)
    t.start()
    (tmp_path / "connector.py").write_text(CONNECTOR)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "build.sh").write_text("true\n")
    port = srv.getsockname()[1]
    r = live(f'''
"$PY" {tmp_path}/connector.py {port} sh -c true
"$PY" {tmp_path}/connector.py {port} bash -e build.sh
"$PY" {tmp_path}/connector.py {port} sh -o errexit build.sh
"$PY" {tmp_path}/connector.py {port} bash --norc -c true
''', workspace=tmp_path / "ws", backend=capture_backend)  # type: ignore[operator]
    stop.set()
    t.join(10)
    srv.close()
    assert "net-shell-after-connect" not in _ids(r), sorted(_ids(r))
