"""``spyglass sandbox check``: can agents be confined on this machine?"""

from __future__ import annotations

import sys

import click

from spyglass.cli.common import format_option


@click.group("sandbox")
def sandbox_group() -> None:
    """The bubblewrap sandbox, the decoy home and the egress proxy (see docs/sandbox.md)."""


@sandbox_group.command("check")
@format_option("json")
def check_cmd(fmt: str) -> None:
    """Check that a sandbox can be built here (bwrap, user and network namespaces,
    AppArmor, seccomp) by starting a real one, then run a program installed under
    $HOME in the default layout (a store inside the workspace hidden); say how to
    fix what is missing.

    Exit code 0 when sandboxed runs will work, 5 when they cannot."""
    from spyglass.cli.common import echo_json
    from spyglass.errors import EXIT_CANNOT_RUN
    from spyglass.sandbox.doctor import sandbox_checks

    checks = sandbox_checks()
    if all(c.ok or not c.required for c in checks):  # the machine can: now the layout runs use
        from spyglass.sandbox.selfcheck import layout_check

        checks.append(layout_check())
    works = all(c.ok or not c.required for c in checks)
    if fmt == "json":
        echo_json({"sandbox": works, "checks": checks})
    else:
        for c in checks:
            mark = "ok " if c.ok else ("-- " if not c.required else "NO ")
            line = f"{mark} {c.name}: {c.detail or c.problem}"
            click.echo(line)
            if not c.ok and c.fix:
                click.echo(f"     fix: {c.fix}")
        click.echo(
            "sandboxed runs work here" if works else "sandboxed runs cannot work here (see the fixes above)"
        )
    sys.exit(0 if works else EXIT_CANNOT_RUN)


COMMANDS = [sandbox_group]
