"""The ``spyglass`` console script that ``./scripts/setup.sh`` installs: Python started isolated and
without ``site``.

pip's console script starts the interpreter as any script: ``site`` runs every ``.pth`` file of
``site-packages`` (an editable install's finder, setuptools' distutils shim: their imports are a
part of every start), and the ``PYTHON*`` variables (``PYTHONPATH``, ``PYTHONHOME``, ...) and the
user's site directory are honoured.  This one starts ``python -I -S``: none of that runs, and the script
itself puts this environment's ``site-packages`` on the import path (after the standard library,
where ``site`` puts it) and, for an editable install, finds the ``spyglass`` package (that name
only) in its checkout, as the editable finder does, but before anything else on the path: a
``spyglass/`` or ``spyglass.py`` an agent put in ``site-packages`` (where an editable install has
none) is never what it runs.  What the command does is the same; the
variables of the environment it is started in (``PYTHONPATH`` a recorded agent left in a shell,
``PYTHONHOME``) no longer choose the code spyglass runs (docs/threat-model.md).

``python -m spyglass.cli.script OUT`` writes the script for this interpreter and this install
(``setup.sh`` writes ``.venv/bin/spyglass``).  Where the interpreter's path cannot be a ``#!``
line (a space in it, or longer than the kernel reads), it writes nothing and exits 1: pip's
script stays.
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

#: bytes of a ``#!`` line the kernel reads (Linux: BINPRM_BUF_SIZE)
SHEBANG_MAX = 255


def render(python: str, site_dirs: list[str], checkout: str | None) -> str:
    """The script's text: ``python`` started ``-I -S``, ``site_dirs`` appended to the import path,
    ``spyglass`` found in ``checkout`` (an editable install) unless None."""
    lines = [
        f"#!{python} -IS",
        "# spyglass's console script (scripts/setup.sh; spyglass/cli/script.py): the interpreter starts isolated",
        "# and without site (no PYTHON* variables, no .pth files, no user site directory)",
        "import sys",
        f"sys.path += {site_dirs!r}",
    ]
    if checkout is not None:
        lines += [
            "from importlib.machinery import PathFinder",
            "",
            "",
            "class _Checkout:",
            '    """``spyglass`` (that name only) from its checkout: an editable install."""',
            "",
            "    @staticmethod",
            "    def find_spec(name, path=None, target=None):",
            f'        return PathFinder.find_spec(name, [{checkout!r}]) if name == "spyglass" else None',
            "",
            "",
            "sys.meta_path.insert(0, _Checkout)  # before site-packages: a spyglass/ made there never runs",
        ]
    lines += ["from spyglass.cli.launch import main", "", "sys.exit(main())", ""]
    return "\n".join(lines)


def for_this_install() -> str | None:
    """The script for this interpreter and the installed ``spyglass`` (None: its path cannot be a ``#!`` line)."""
    python = sys.executable
    if not python or any(c.isspace() for c in python) or len(f"#!{python} -IS".encode()) > SHEBANG_MAX:
        return None
    site_dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
    package = Path(__file__).resolve().parent.parent  # .../spyglass
    inside = any(package.parent == Path(d).resolve() for d in site_dirs)
    return render(python, site_dirs, None if inside else str(package.parent))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m spyglass.cli.script OUT", file=sys.stderr)
        return 2
    text = for_this_install()
    if text is None:
        print(f"spyglass: {sys.executable!r} cannot be a #! line: pip's console script stays", file=sys.stderr)
        return 1
    out = Path(argv[0])
    tmp = out.with_name(out.name + ".new")
    tmp.write_text(text)
    tmp.chmod(0o755)
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
