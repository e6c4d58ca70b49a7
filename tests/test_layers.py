"""Imports flow one way: the layers of docs/design.md, checked on the source.

Every import counts, also one inside a function or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "spyglass"

#: leaf modules that import nothing of spyglass: any layer may use them
LEAVES = ("spyglass.errors", "spyglass.logs")
#: what the bottom layers may import of spyglass
BOTTOM = {
    "capture": ("spyglass.capture", "spyglass.events", *LEAVES),
    "events": ("spyglass.events", *LEAVES),
}
#: who may import the session core (the callers above it)
SESSION_CALLERS = ("cli", "session", "skills", "api.py", "__init__.py")


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            if node.module == "spyglass":  # from spyglass import cli
                out.extend((node.lineno, f"spyglass.{a.name}") for a in node.names)
    return [(n, m) for n, m in out if m == "spyglass" or m.startswith("spyglass.")]


def _modules() -> list[tuple[str, Path]]:
    return [(str(p.relative_to(PKG)), p) for p in sorted(PKG.rglob("*.py"))]


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_capture_and_events_import_nothing_above_them() -> None:
    bad = []
    for rel, path in _modules():
        top = rel.split("/")[0]
        allowed = BOTTOM.get(top)
        if allowed is None:
            continue
        for line, mod in _imports(path):
            if not any(_within(mod, a) for a in allowed):
                bad.append(f"spyglass/{rel}:{line}: imports {mod}")
    assert bad == []


def test_the_leaf_modules_import_nothing_of_spyglass() -> None:
    for leaf in LEAVES:
        path = PKG / (leaf.removeprefix("spyglass.") + ".py")
        assert _imports(path) == [], leaf


def test_nothing_outside_the_cli_imports_the_cli() -> None:
    bad = []
    for rel, path in _modules():
        if rel.startswith("cli/") or rel == "__main__.py":  # the entry point runs the CLI
            continue
        bad.extend(
            f"spyglass/{rel}:{line}: imports {mod}" for line, mod in _imports(path) if _within(mod, "spyglass.cli")
        )
    assert bad == []


def test_only_the_callers_of_a_session_import_it() -> None:
    bad = []
    for rel, path in _modules():
        if rel.split("/")[0] in SESSION_CALLERS:
            continue
        bad.extend(
            f"spyglass/{rel}:{line}: imports {mod}"
            for line, mod in _imports(path)
            if _within(mod, "spyglass.session")
        )
    assert bad == []


def test_no_module_is_over_500_lines() -> None:
    long = [
        f"spyglass/{rel}: {n} lines"
        for rel, p in _modules()
        if (n := len(p.read_text().splitlines())) > 500
    ]
    assert long == []
