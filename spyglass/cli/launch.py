"""The ``spyglass`` command's entry point: what a run starts before the command line loads.

Nothing here imports click or a command's module.  ``spyglass run`` that may use eBPF starts
loading the program first (:func:`_preload`), so the kernel's verifier runs while click, the
command's modules and the run's own imports load; and the run's process pauses the cyclic
collector (spyglass/gcpause.py).  Then :func:`spyglass.cli.main.run_cli` parses the command
line with click as usual.
"""

from __future__ import annotations

import sys

from spyglass import gcpause


def _invoked(argv: list[str]) -> str | None:
    """The subcommand named on the command line (None: none, or help)."""
    for i, arg in enumerate(argv):
        if arg in ("-h", "--help", "--version"):
            return None
        if arg == "--color":  # the group's only option with a value
            continue
        if arg.startswith("-"):
            continue
        if i > 0 and argv[i - 1] == "--color":
            continue
        return arg
    return None


def _preload(argv: list[str], command: str | None) -> None:
    """``spyglass run`` that may use eBPF: the program starts loading before the CLI's imports.

    The kernel's verifier takes most of a run's start and holds no interpreter lock, so the load
    overlaps everything until the launch.  A run that ends up not using it (an error in its
    options, a fallback to strace) closes it unused."""
    if command != "run":
        return
    opts = argv[: argv.index("--")] if "--" in argv else argv
    for i, arg in enumerate(opts):
        if arg in ("-h", "--help", "--backend=strace") or (arg == "--backend" and opts[i + 1 : i + 2] == ["strace"]):
            return
    from spyglass.capture.ebpf import preload

    preload.start()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    command = _invoked(args)
    if command == "run" and argv is None:  # spyglass's own process (a caller's main(argv) returns as always)
        try:
            _start(args, argv, command)
        except SystemExit as exc:
            leave(exc.code)  # returns when the interpreter's own exit is needed
            raise
        return
    _start(args, argv, command)


def leave(code: object) -> None:
    """The end of a ``spyglass run`` process, without the interpreter's teardown (its modules and
    objects freed one by one: about 5 ms of every run, after everything is written).

    What the interpreter's exit does that matters still happens: the ``atexit`` functions run
    (the phase marks, logging's and exporters' flushes) and stdout and stderr are flushed.
    Nothing is left unwritten: the run's files are closed when the run finishes (its checkpoint
    holds their digests), and the evidence never depends on an orderly exit (it is kept for a
    ``kill -9`` at any moment: docs/evidence.md).  Returns instead, for the interpreter's own exit,
    when a thread that is not a daemon still runs (the exit waits for it), when the code is not a
    number (the interpreter prints it), or when a flush fails (it reports that as it does)."""
    import atexit
    import os
    import threading

    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        return
    main_thread = threading.main_thread()
    if threading.current_thread() is not main_thread or any(
        not t.daemon for t in threading.enumerate() if t is not main_thread
    ):
        return
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None:
        return
    run_exitfuncs()  # (and forgets them: the interpreter's exit does not run them again)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:
        return
    os._exit(code or 0)


def _start(args: list[str], argv: list[str] | None, command: str | None) -> None:
    if command == "run":  # the collector is resumed once the agent is launched (spyglass/gcpause.py)
        gcpause.pause()
    try:
        _preload(args, command)
        if command == "run":  # a plain command line is run without loading click (spyglass/cli/direct.py)
            import os

            from spyglass.cli import direct

            parsed = direct.parse(args, os.environ)
            if parsed is not None:
                direct.invoke(*parsed)
        from spyglass.cli.main import run_cli

        run_cli(argv, command)
    finally:
        gcpause.end()  # a caller that runs the CLI in its own process gets its collector back


def configure_output(verbose: int, color: str | None) -> None:
    """The group's options: colours (``--color``) and how much is logged (``-v``)."""
    from spyglass import logs, termcolor

    termcolor.set_mode(color)
    level = logs.WARNING - 10 * verbose
    # logging itself loads at the first record (spyglass/logs.py): a run that goes well logs nothing
    logs.configure(level=max(level, logs.DEBUG), format="spyglass: %(levelname)s: %(message)s")
