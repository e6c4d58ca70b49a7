"""What the default sandbox layout shows, protects and passes, besides the mount plan's basics.

* :func:`program_roots`: the install tree of the launched program (the file
  it resolves to, the tree that file belongs to, and its interpreter's, via a
  ``#!`` line and a venv's ``pyvenv.cfg``), so that an agent installed under
  ``$HOME`` or ``/tmp`` (a repo's ``.venv``, pipx, uv, nvm, pyenv, a local
  ``node_modules``) runs inside, read-only; :func:`program_aliases`: that tree
  again at the name the program was reached by, when a directory on the way is
  a symlink.
* :data:`PROTECTED_IN_WORKSPACE`: paths inside a writable root that stay
  read-only (``.git/config``, ``.git/hooks``, the agents' own project config):
  a write there runs code on the host later (``core.fsmonitor``, a hook).
* :data:`PINNED_IN_WORKSPACE`: git directories bound onto themselves, read-write,
  so that they are mount points inside: ``mv .git .gitx`` (which would carry the
  read-only binds away and let a new ``.git`` with a hostile config take its
  place) and ``rmdir .git`` fail with ``EBUSY``.
* :data:`SYSTEM_SECRETS`: host files masked inside (``/etc/shadow`` ...).
* :func:`filter_env`: the environment passed in: :data:`ENV_ALLOW` plus the
  policy's ``sandbox.env.pass``; host tokens in the environment are secrets too.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import shutil
from collections.abc import Iterable, Mapping

#: paths (relative to each workspace root) that stay read-only inside the sandbox
PROTECTED_IN_WORKSPACE: tuple[str, ...] = (
    ".git/config",
    ".git/hooks",
    ".git/info",  # attributes name filter and diff drivers
    ".git/commondir",  # redirects git to another config (when the repository has one)
    ".git/config.worktree",
    ".git/modules/*/config",  # submodules: `git status` runs in them
    ".git/modules/*/hooks",
    ".git/modules/*/info",
    ".git/modules/*/commondir",
    ".codex",
    ".claude",
    ".mcp.json",
    ".vscode",
)

#: git directories (relative to each workspace root, globs) made mount points inside the sandbox
#: (bound read-write onto themselves), so that they cannot be renamed or removed
PINNED_IN_WORKSPACE: tuple[str, ...] = (".git", ".git/modules/*")

#: host files hidden inside the sandbox (globs)
SYSTEM_SECRETS: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
    "/etc/spyglass",
)

#: environment variables passed into the sandbox by default (names and globs); everything else,
#: API keys and tokens included, stays outside unless the policy lists it in ``sandbox.env.pass``
ENV_ALLOW: tuple[str, ...] = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "SHLVL", "TMPDIR", "TZ",
    "LANG", "LANGUAGE", "LC_*", "TERM", "TERM_PROGRAM", "COLORTERM", "COLUMNS", "LINES",
    "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "EDITOR", "VISUAL", "PAGER", "CI",
    "DEBIAN_FRONTEND", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
    "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
    "PYTHONIOENCODING", "PYENV_ROOT", "PYENV_VERSION", "PIPX_HOME", "PIPX_BIN_DIR", "UV_CACHE_DIR",
    "NODE_PATH", "NVM_DIR", "NVM_BIN", "GOPATH", "GOROOT", "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME",
    "http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
)  # fmt: skip

_BIN_DIRS = frozenset({"bin", "sbin", "shims", "libexec", "Scripts"})
_MAX_DEPTH = 4


def filter_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> tuple[dict[str, str], list[str]]:
    """(the variables passed in, the names held back)."""
    allow = (*ENV_ALLOW, *extra)
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in env.items():
        if any(name == pat or fnmatch.fnmatchcase(name, pat) for pat in allow):
            kept[name] = value
        else:
            dropped.append(name)
    return kept, sorted(dropped)


def system_secrets() -> list[str]:
    out: list[str] = []
    for pat in SYSTEM_SECRETS:
        out.extend(sorted(glob.glob(pat)) if any(c in pat for c in "*?[") else [pat])
    return [p for p in out if os.path.lexists(p)]


def _existing(workspace: Iterable[str], rels: Iterable[str]) -> list[str]:
    out: list[str] = []
    for root in workspace:
        for rel in rels:
            p = os.path.join(os.path.realpath(root), rel)
            found = sorted(glob.glob(glob.escape(os.path.realpath(root)) + "/" + rel)) if "*" in rel else [p]
            out.extend(q for q in found if os.path.lexists(q) and not os.path.islink(q) and q not in out)
    return out


def protected_paths(workspace: Iterable[str]) -> list[str]:
    """The :data:`PROTECTED_IN_WORKSPACE` paths that exist, and a ``.git`` that is a file (a
    worktree's or a submodule's pointer to its git directory)."""
    roots = list(workspace)
    gitfiles = [p for p in _existing(roots, (".git",)) if os.path.isfile(p)]
    return [*gitfiles, *_existing(roots, PROTECTED_IN_WORKSPACE)]


def pinned_paths(workspace: Iterable[str]) -> list[str]:
    """The :data:`PINNED_IN_WORKSPACE` directories that exist."""
    return [p for p in _existing(workspace, PINNED_IN_WORKSPACE) if os.path.isdir(p)]


def which(prog: str, env: Mapping[str, str], cwd: str) -> str | None:
    if "/" in prog:
        full = prog if os.path.isabs(prog) else os.path.join(cwd, prog)
        return full if os.path.exists(full) else None
    return shutil.which(prog, path=env.get("PATH", os.defpath))


def _tree_of(path: str) -> str:
    """The install tree a program file belongs to: ``<prefix>`` for ``<prefix>/bin/x``, the whole
    ``node_modules`` for ``.../node_modules/<pkg>/...`` (an npm package finds its dependencies and
    its platform binaries in sibling packages: codex's and Claude Code's native executables), else
    its directory."""
    parts = path.split("/")
    if "node_modules" in parts:
        i = parts.index("node_modules")
        if i + 1 < len(parts) - 1:
            return "/".join(parts[: i + 1])
    d = os.path.dirname(path)
    if os.path.basename(d) in _BIN_DIRS:
        return os.path.dirname(d) or "/"
    return d


def _shebang(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return line.split()


def _venv_home(tree: str) -> str | None:
    """A venv's base interpreter directory (``home =`` in pyvenv.cfg)."""
    try:
        with open(os.path.join(tree, "pyvenv.cfg"), encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.partition("=")
                if sep and key.strip() == "home":
                    return value.strip()
    except OSError:
        pass
    return None


_INTERPRETER = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|node(js)?|bun|deno|ruby|perl|php|bash|sh|dash|zsh)$")


def _script_arg(argv: list[str], cwd: str) -> str | None:
    """The script an interpreter is asked to run (its first argument that is not an option)."""
    if len(argv) < 2 or not _INTERPRETER.match(os.path.basename(argv[0])):
        return None
    for arg in argv[1:]:
        if arg in ("-m", "-c", "-e", "--eval"):
            return None
        if arg.startswith("-"):
            continue
        path = os.path.normpath(arg if os.path.isabs(arg) else os.path.join(cwd, arg))
        return os.path.realpath(path) if os.path.isfile(path) else None
    return None


def _broad(home: str) -> set[str]:
    """Directories never bound whole as a program's tree."""
    return {"/", "/tmp", "/home", "/root", os.path.normpath(home)}


def _install_tree(file: str, home: str) -> str:
    """:func:`_tree_of` ``file``, narrowed to the file's own directory when that tree would be a
    broad directory or hold the home directory."""
    tree = _tree_of(file)
    if tree in _broad(home) or os.path.normpath(home).startswith(tree.rstrip("/") + "/"):
        return os.path.dirname(file)
    return tree


def program_roots(argv: list[str], env: Mapping[str, str], cwd: str, home: str) -> list[str]:
    """Host paths the launched program needs to run (to bind read-only when hidden inside).

    The typed path (often a symlink, as in ``~/.local/bin``) is bound as itself, never its whole
    directory; trees are taken from resolved paths.  A tree that would be the home directory, ``/``
    or ``/tmp`` itself is narrowed to the program's own directory.
    """
    out: list[str] = []
    todo: list[tuple[str, int]] = [(argv[0], 0)] if argv else []
    broad = _broad(home)
    script = _script_arg(argv, cwd)
    if script is not None:  # `python agent.py`, `node cli.js`: the script's directory too
        d = os.path.dirname(script)
        hidden_dot = os.path.dirname(d) == os.path.normpath(home) and os.path.basename(d).startswith(".")
        out.append(script if d in broad or hidden_dot else d)
    while todo:
        prog, depth = todo.pop()
        found = which(prog, env, cwd)
        if found is None or depth > _MAX_DEPTH:
            continue
        found = os.path.normpath(found)
        real = os.path.realpath(found)
        if found != real:
            out.append(found)
        tree = _install_tree(real, home)
        out.append(tree)
        base = _venv_home(tree)
        if base:
            out.append(_tree_of(os.path.join(base, "python")))
        interp = _shebang(real)
        if interp:
            if os.path.basename(interp[0]) == "env":
                rest = [a for a in interp[1:] if not a.startswith("-")]
                if rest:
                    todo.append((rest[0], depth + 1))
            else:
                todo.append((interp[0], depth + 1))
    seen: list[str] = []
    for p in out:
        if p not in seen and p not in broad:
            seen.append(p)
    return seen


def program_aliases(argv: list[str], env: Mapping[str, str], cwd: str, home: str) -> list[tuple[str, str]]:
    """``(real tree, typed tree)`` when the launched program is reached through a directory that is a
    symlink (``PATH`` naming ``/tmp/x/.cache/...`` with ``.cache`` a link elsewhere): its install tree
    is bound at the typed name too, so that what the program finds beside itself by that name (node's
    ``.bin`` links, a script's ``$0/../lib``) is there inside, where the link itself is not."""
    found = which(argv[0], env, cwd) if argv else None
    if found is None:
        return []
    found = os.path.normpath(os.path.abspath(found))
    typed_dir = os.path.dirname(found)
    if os.path.realpath(typed_dir) == typed_dir:
        return []
    typed = _install_tree(found, home)
    real = os.path.realpath(typed)
    if typed in _broad(home) or real in _broad(home) or not os.path.isdir(real):
        return []
    return [(real, typed)]
