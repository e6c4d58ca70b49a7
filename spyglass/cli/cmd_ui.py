"""``spyglass ui``: a local web UI over the store, live while runs go on."""

from __future__ import annotations

from pathlib import Path

import click

from spyglass.cli.common import store_option


@click.command("ui")
@store_option
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0: any free port.")
def ui_cmd(store_path: Path | None, port: int) -> None:
    """Serve a web UI on loopback: the runs (filter by agent, task, status, level) and
    each run's report, updating live while the run goes on.

    \b
    The URL printed carries a random token; without it the server answers 403.
    It listens on 127.0.0.1 only and reads the store, never writes it.
    Stop it with Ctrl-C.
    """
    import time

    from spyglass.cli.common import open_store
    from spyglass.errors import UsageError
    from spyglass.web.server import start_ui

    store = open_store(store_path)
    store.index.close()
    try:
        server = start_ui(store.root.resolve(), port)
    except OSError as exc:
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}", hint="try another --port") from exc
    click.echo(f"spyglass: UI for {store.root} at {server.url}", err=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


COMMANDS = [ui_cmd]
