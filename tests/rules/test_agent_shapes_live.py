"""Command shapes real agent CLIs use on benign work stay silent under a real run; the attacks
that share their words still fire (both backends).

- Claude Code reads the user's git identity with a hardened git: `git -c core.hooksPath=/dev/null
  -c core.fsmonitor= ... config user.name` (per-command overrides, nothing is set).
- codex starts each tool call as `codex --codex-run-as-process-setup ... WORKDIR /bin/bash
  /bin/bash -c __CODEX_SNAPSHOT...`: a workspace under a directory named `nc` is no netcat.
"""

from __future__ import annotations

from pathlib import Path

HARDENED_GIT = (
    "git -c core.askPass= -c core.hooksPath=/dev/null -c core.fsmonitor= -c credential.helper= "
    "-c protocol.ext.allow=never config user.name"
)


def _ids(r: object) -> set[str]:
    return r.ids()  # type: ignore[attr-defined,no-any-return]


def test_hardened_git_reading_config_is_quiet(live: object, capture_backend: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    r = live(  # type: ignore[operator]
        f'''
git init -q "$WS/repo" && cd "$WS/repo" || exit 1
{HARDENED_GIT} > /dev/null
git -c core.hooksPath=/dev/null config --get user.email > /dev/null
exit 0
''',
        workspace=ws, backend=capture_backend,
    )  # fmt: skip
    assert "persist-git-config" not in _ids(r), sorted(_ids(r))


def test_git_config_setting_a_risky_key_still_fires(live: object, capture_backend: str, tmp_path: Path) -> None:
    r = live(  # type: ignore[operator]
        '''
git init -q "$WS/repo" && cd "$WS/repo" || exit 1
git -c core.hooksPath=/dev/null config core.fsmonitor "$WS/evil.sh"
''',
        workspace=tmp_path / "ws", backend=capture_backend,
    )  # fmt: skip
    assert "persist-git-config" in _ids(r), sorted(_ids(r))


def test_bash_in_a_workspace_under_nc_is_no_reverse_shell(live: object, capture_backend: str,
                                                          tmp_path: Path) -> None:
    ws = tmp_path / "nc" / "ws"
    r = live(  # type: ignore[operator]
        '''
/bin/sh -c 'true' "$WS" /bin/bash -c '__CODEX_SNAPSHOT_OVERRIDE_SET_0=1; ls'
/bin/bash -c '__CODEX_SNAPSHOT_OVERRIDE_SET_0=1; ls' > /dev/null
''',
        workspace=ws, backend=capture_backend,
    )  # fmt: skip
    assert "net-reverse-shell" not in _ids(r), sorted(_ids(r))


def test_netcat_handing_out_a_shell_from_that_workspace_fires(live: object, capture_backend: str,
                                                              tmp_path: Path) -> None:
    # a netcat of our own that exits at once: the rule keys on the command line
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nc").write_text("#!/bin/sh\nexit 0\n")
    (bindir / "nc").chmod(0o755)
    r = live(  # type: ignore[operator]
        f'''
cd "$WS" && "{bindir}/nc" 127.0.0.1 9 -e /bin/sh
''',
        workspace=tmp_path / "nc" / "ws", backend=capture_backend,
    )  # fmt: skip
    assert "net-reverse-shell" in _ids(r), sorted(_ids(r))
