"""Normalization: turning run-specific names into names that repeated runs share.

Two runs of the same task differ in their workspace and temp directories, in
process ids, in timestamps and in the random parts of temporary file names.
The :class:`Normalizer` rewrites every path, argument and host so those
differences vanish, and sorts the dynamic-loader, locale and interpreter-cache
accesses that every process makes into *noise classes* that are dropped (the
default) or folded into one resource per class.

The rules, in the order they apply (docs/analysis.md has the full table):

1. Noise classes (``loader``, ``locale``, ``pycache``, ``runtime``, ``ignored``)
   are recognised on the raw path.
2. Run places become placeholders, longest prefix first: workspace roots
   (``<WS>``, ``<WS2>`` …), skill directories (``<SKILL:name>``), the working
   directory when it is outside the workspace (``<CWD>``), the store
   (``<STORE>``), the home directory (``<HOME>``) and temp directories
   (``<TMP>``).
3. ``/proc/<digits>`` becomes ``/proc/<pid>`` (``/task/<digits>`` ``<tid>``).
4. Folds, each a named regular expression: ``uuid``, ``time``, ``hex``,
   ``num``, ``pid``, ``tmpname``, ``tmpchild``, ``mixed``, then any extra folds
   of the rules.

Everything here is pure: no file system access.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import PurePosixPath
from typing import Final

import msgspec

from spyglass.policy.paths import glob_to_regex as _core_glob

#: noise classes, in the order they are tested
NOISE_CLASSES: Final = ("ignored", "pycache", "loader", "locale", "runtime")
#: folds, in the order they apply
FOLDS: Final = ("uuid", "time", "hex", "num", "pid", "tmpname", "tmpchild", "mixed")
NOISE_ACTIONS: Final = ("drop", "fold", "keep")
DEFAULT_TEMP_DIRS: Final = ("/tmp", "/var/tmp", "/dev/shm")

#: operations that only look at a file; noise classes other than pycache apply to these
LOOK_OPS: Final = frozenset({"read", "list"})

_LIB_DIRS: Final = (
    "/lib/", "/lib32/", "/lib64/", "/libx32/",
    "/usr/lib/", "/usr/lib32/", "/usr/lib64/", "/usr/libx32/",
    "/usr/local/lib/", "/usr/local/lib64/",
)
_LOCALE_DIRS: Final = (
    "/usr/lib/locale/", "/usr/share/locale/", "/usr/share/i18n/", "/usr/share/locale-langpack/",
)
_LOCALE_DIRS_ALL: Final = (*_LOCALE_DIRS, "/usr/share/zoneinfo/")
_LOCALE_FILES: Final = frozenset(
    {"/etc/locale.alias", "/etc/default/locale", "/etc/localtime", "/etc/timezone"}
)
#: language runtimes' own libraries wherever they are installed (pyenv, venvs, conda, /opt)
_RUNTIME_RE: Final = re.compile(
    r"/lib(?:32|64)?/python[0-9][0-9.]*(?:/|$)|/(?:site|dist)-packages(?:/|$)|/share/perl5?/|/lib/ruby/"
)
_LOADER_FILES: Final = frozenset({"/etc/ld.so.cache", "/etc/ld.so.preload", "/etc/ld.so.conf"})
_SO_RE: Final = re.compile(r"\.so(?:\.[0-9][0-9.]*)?$")

_FOLD_RES: Final[dict[str, tuple[re.Pattern[str], str]]] = {
    "uuid": (
        re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   r"[0-9a-fA-F]{12}(?![0-9A-Za-z])"),
        "<uuid>",
    ),
    "time": (
        re.compile(r"(?<![0-9A-Za-z])(?:19|20)[0-9]{2}-?[01][0-9]-?[0-3][0-9]"
                   r"(?:[T_ -]?[0-2][0-9][:.-]?[0-5][0-9](?:[:.-]?[0-5][0-9])?(?:[.,][0-9]+)?Z?)?(?![0-9])"),
        "<time>",
    ),
    "hex": (
        re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![0-9A-Za-z])"),
        "<hex>",
    ),
    "num": (re.compile(r"(?<![0-9])[0-9]{8,}(?![0-9])"), "<num>"),
    "tmpname": (
        re.compile(r"(?<![A-Za-z0-9])(\.?)(tmp|TMP)(?:([a-z0-9_]{8})|\.([A-Za-z0-9]{6,12}))(?![A-Za-z0-9_])"),
        r"\1\2<rand>",
    ),
    "mixed": (re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{6,}(?![A-Za-z0-9])"), "<rand>"),
}
_PID_RE: Final = re.compile(r"(?<![0-9])[0-9]{3,7}(?![0-9])")
_PROC_RE: Final = re.compile(r"^/proc/[0-9]+(?=/|$)")
_TASK_RE: Final = re.compile(r"^/proc/<pid>/task/[0-9]+(?=/|$)")
_TMPCHILD_RE: Final = re.compile(r"^(.*?[-._]|)([a-z0-9_]{8})((?:\.[A-Za-z0-9]+)*)$")
_TMP_IN_TEXT_RE: Final = re.compile(r"<TMP>(/[^\s'\"]*)")
_PROC_IN_TEXT_RE: Final = re.compile(r"(?<![\w.-])/proc/[0-9]+(?![0-9])")
_MAY_FOLD_RE: Final = re.compile(r"[0-9]|tmp|TMP")
_PYTEST_RE: Final = re.compile(r"^pytest-of-[^/]+/pytest-[0-9]+(?=/|$)")


def _looks_random(token: str) -> bool:
    """A token with at least three letter/digit alternations (``k3j9x2``), not a word like ``sha256sum``."""
    return sum(1 for a, b in itertools.pairwise(token) if a.isdigit() != b.isdigit()) >= 3


class NormalizeRules(msgspec.Struct, frozen=True):
    """What normalization does; every field has a documented default.

    ``noise`` maps a noise class to ``drop`` (not a resource; counted in the
    profile's ``noise``), ``fold`` (one resource ``<noise:CLASS>`` per op) or
    ``keep`` (an ordinary resource).  ``folds`` lists the folds that apply.
    ``ignore_paths`` are globs (see :func:`compile_globs`) whose matches form the
    ``ignored`` class.  ``extra_folds`` are (regex, replacement) pairs applied
    after the built-in folds.  ``include_failed`` keeps failed accesses as edges
    whose op ends in ``!`` (``read!``); by default they are not resources.
    """

    noise: Mapping[str, str] = msgspec.field(default_factory=lambda: dict.fromkeys(NOISE_CLASSES, "drop"))
    folds: Sequence[str] = FOLDS
    temp_dirs: Sequence[str] = DEFAULT_TEMP_DIRS
    ignore_paths: Sequence[str] = ()
    extra_folds: Sequence[tuple[str, str]] = ()
    include_failed: bool = False
    fold_loopback_ephemeral_ports: bool = True
    max_command_chars: int = 240


class RunPlaces(msgspec.Struct, frozen=True):
    """The run-specific directories whose names become placeholders."""

    workspace: Sequence[str] = ()
    cwd: str | None = None
    home: str | None = None
    store: str | None = None
    skills: Sequence[str] = ()

    def prefixes(self, temp_dirs: Sequence[str] = DEFAULT_TEMP_DIRS) -> list[tuple[str, str]]:
        """(directory, placeholder), longest directory first."""
        out: list[tuple[str, str]] = []
        seen: set[str] = set()

        def add(path: str | None, label: str) -> None:
            if not path or not path.startswith("/"):
                return
            p = str(PurePosixPath(path))
            if p == "/" or p in seen:
                return
            seen.add(p)
            out.append((p, label))

        for i, ws in enumerate(self.workspace):
            add(ws, "<WS>" if i == 0 else f"<WS{i + 1}>")
        labels: set[str] = set()
        for sk in self.skills:
            name = PurePosixPath(sk).name
            label, n = f"<SKILL:{name}>", 1
            while label in labels:  # two skills of the same name in different places
                n += 1
                label = f"<SKILL:{name}#{n}>"
            labels.add(label)
            add(sk, label)
        if self.cwd and not any(_under(self.cwd, w) for w in self.workspace):
            add(self.cwd, "<CWD>")
        add(self.store, "<STORE>")
        add(self.home, "<HOME>")
        for t in temp_dirs:
            add(t, "<TMP>")
        out.sort(key=lambda pl: len(pl[0]), reverse=True)
        return out


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


# -- globs -----------------------------------------------------------------------------------


def glob_to_regex(pattern: str) -> str:
    """A path glob as a regex, in the policy's dialect (:func:`spyglass.policy.paths.glob_to_regex`):
    ``**`` crosses directories, ``*`` and ``?`` do not; ``dir/`` and ``dir/**`` match the
    directory and everything below it."""
    return _core_glob(pattern)


class GlobSet:
    """Path globs matched against a normalized path.

    A pattern that starts with ``/``, ``~`` or a placeholder (``<WS>/tests/**``)
    is matched against the whole normalized path (``~`` standing for ``<HOME>``).
    Any other pattern (``tests/**``) is relative: it matches below any workspace
    placeholder, or, for a pattern with no ``/`` in it, a final name anywhere.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        absolute: list[str] = []
        relative: list[str] = []
        for p in self.patterns:
            if p.startswith("~"):
                absolute.append(re.escape("<HOME>") + glob_to_regex(p[1:]))
            elif p.startswith(("/", "<")):
                absolute.append(glob_to_regex(p))
            elif "/" not in p.rstrip("/"):
                relative.append(glob_to_regex(p))
                absolute.append(r"(?:.*/)?" + glob_to_regex(p))
            else:
                relative.append(glob_to_regex(p.removeprefix("./")))
        parts = [f"(?:{a})" for a in absolute]
        if relative:
            parts.append(r"<WS[0-9]*>/(?:" + "|".join(relative) + ")")
        self._re = re.compile("|".join(parts)) if parts else None

    def __bool__(self) -> bool:
        return self._re is not None

    def match(self, normalized_path: str) -> bool:
        return self._re is not None and self._re.fullmatch(normalized_path) is not None


def compile_globs(patterns: Iterable[str]) -> GlobSet:
    return GlobSet(patterns)


# -- the normalizer ----------------------------------------------------------------------------


class Normalizer:
    """Applies :class:`NormalizeRules` to the names of one run.

    It remembers the run's process ids as events go by (for the ``pid`` fold)
    and caches path results, with a bounded cache.
    """

    #: entries per cache (raw path -> result); a full cache is emptied, so memory stays bounded
    CACHE_LIMIT = 1 << 13

    def __init__(self, places: RunPlaces | None = None, rules: NormalizeRules | None = None) -> None:
        self.rules = rules or NormalizeRules()
        self.places = places or RunPlaces()
        unknown = [f for f in self.rules.folds if f not in FOLDS]
        if unknown:
            raise ValueError(f"unknown fold(s): {', '.join(unknown)} (known: {', '.join(FOLDS)})")
        bad = {k: v for k, v in self.rules.noise.items() if k not in NOISE_CLASSES or v not in NOISE_ACTIONS}
        if bad:
            raise ValueError(f"bad noise setting(s): {bad}")
        self.pids: set[str] = set()
        self._folds = tuple(self.rules.folds)
        self._fold_steps = self._build_folds()
        self._extra = [(re.compile(rx), repl) for rx, repl in self.rules.extra_folds]
        self._ignore = GlobSet(self.rules.ignore_paths)
        self._prefixes = self.places.prefixes(self.rules.temp_dirs)
        if self._prefixes:
            alts = "|".join(re.escape(p) for p, _ in self._prefixes)
            self._prefix_re: re.Pattern[str] | None = re.compile(rf"(?<![\w.~-])({alts})(?=/|$|[^\w.~-])")
        else:
            self._prefix_re = None
        self._label = dict(self._prefixes)
        self._skill_roots = tuple(
            str(PurePosixPath(s)) + "/" for s in self.places.skills if s.startswith("/")
        )
        self._path_cache: dict[str, str] = {}
        self._noise_cache: dict[str, tuple[str | None, str | None]] = {}

    # -- process ids ---------------------------------------------------------------------------
    def note_pid(self, pid: int | None) -> None:
        if pid is not None and pid >= 100:
            self.pids.add(str(pid))

    # -- noise ------------------------------------------------------------------------------------
    def noise_class(self, path: str, op: str) -> str | None:
        """The noise class of an access (raw path, op without ``!``), or None."""
        hit = self._noise_cache.get(path)
        if hit is None:
            hit = self._classify(path)
            if len(self._noise_cache) >= self.CACHE_LIMIT:
                self._noise_cache.clear()
            self._noise_cache[path] = hit
        return hit[1] if op in LOOK_OPS else hit[0]

    def _classify(self, path: str) -> tuple[str | None, str | None]:
        """(class for any op, class for read/list)."""
        if self._ignore and self._ignore.match(self.path(path)):
            return "ignored", "ignored"
        name = path.rsplit("/", 1)[-1]
        if "/__pycache__/" in path or path.endswith("/__pycache__") or name.endswith((".pyc", ".pyo")):
            return "pycache", "pycache"
        if self._skill_roots and path.startswith(self._skill_roots):
            return None, None
        if path in _LOADER_FILES or path.startswith("/etc/ld.so.conf.d/") or _SO_RE.search(name):
            return None, "loader"
        if path in _LOCALE_FILES or path.startswith(_LOCALE_DIRS_ALL) or "/gconv/" in path:
            return None, "locale"
        if path.startswith(_LIB_DIRS) or _RUNTIME_RE.search(path) or name == "pyvenv.cfg":
            return None, "runtime"
        return None, None

    def noise_action(self, cls: str) -> str:
        return self.rules.noise.get(cls, "drop")

    # -- paths --------------------------------------------------------------------------------------
    def path(self, raw: str) -> str:
        """The normalized form of an absolute path."""
        hit = self._path_cache.get(raw)
        if hit is not None:
            return hit
        out = self._normalize_path(raw)
        if len(self._path_cache) >= self.CACHE_LIMIT:
            self._path_cache.clear()
        self._path_cache[raw] = out
        return out

    def _normalize_path(self, raw: str) -> str:
        head, rest = "", raw
        for prefix, label in self._prefixes:
            if raw == prefix or raw.startswith(prefix + "/"):
                head, rest = label, raw[len(prefix) :]
                break
        if not head:
            rest = _PROC_RE.sub("/proc/<pid>", rest)
            rest = _TASK_RE.sub("/proc/<pid>/task/<tid>", rest)
        elif head == "<TMP>":
            rest = self._fold_tmp_child(rest)
        return head + self._fold(rest)

    def _fold_tmp_child(self, rest: str) -> str:
        if "tmpchild" not in self._folds or not rest.startswith("/"):
            return rest
        body = rest[1:]
        m = _PYTEST_RE.match(body)
        if m:
            return "/pytest-of-<user>/pytest-<n>" + body[m.end() :]
        child, sep, tail = body.partition("/")
        m2 = _TMPCHILD_RE.match(child)
        if m2:
            child = f"{m2.group(1)}<rand>{m2.group(3)}"
        return "/" + child + sep + tail

    def _build_folds(self) -> list[Callable[[str], str]]:
        steps: list[Callable[[str], str]] = []
        for name in self._folds:
            if name == "tmpchild":
                continue
            if name == "pid":
                steps.append(lambda t: _PID_RE.sub(self._pid_sub, t) if self.pids else t)
                continue
            rx, repl = _FOLD_RES[name]
            if name == "mixed":
                steps.append(partial(rx.sub, _mixed_sub))
            elif name == "tmpname":
                steps.append(partial(rx.sub, _tmpname_sub))
            else:
                steps.append(partial(rx.sub, repl))
        return steps

    def _fold(self, text: str) -> str:
        # every built-in fold needs a digit, or "tmp" for the temp-name fold
        if text and _MAY_FOLD_RE.search(text):
            for step in self._fold_steps:
                text = step(text)
        for rx, repl in self._extra:
            text = rx.sub(repl, text)
        return text

    def _pid_sub(self, m: re.Match[str]) -> str:
        return "<pid>" if m.group(0) in self.pids else m.group(0)

    # -- free text (arguments) ----------------------------------------------------------------------
    def text(self, raw: str) -> str:
        """Normalize free text (a command argument): places anywhere, then the folds."""
        if self._prefix_re is not None:
            text = self._prefix_re.sub(lambda m: self._label[m.group(1)], raw)
            if "<TMP>/" in text:
                text = _TMP_IN_TEXT_RE.sub(lambda m: "<TMP>" + self._fold_tmp_child(m.group(1)), text)
        else:
            text = raw
        text = _PROC_IN_TEXT_RE.sub("/proc/<pid>", text)
        return self._fold(text)

    # -- commands -----------------------------------------------------------------------------------
    def command(self, exe: str | None, argv: Sequence[str] | None) -> str:
        """``EXE ARG ...`` with the executable's path normalized and each argument as text."""
        parts = [self.path(exe) if exe else (self.text(argv[0]) if argv else "?")]
        for arg in (argv or [])[1:]:
            parts.append(_quote(self.text(arg)))
        out = " ".join(parts)
        limit = self.rules.max_command_chars
        if len(out) > limit:
            import hashlib

            digest = hashlib.sha256(out.encode("utf-8", "surrogatepass")).hexdigest()[:10]
            out = f"{out[: limit - 14]}…#{digest}"
        return out

    # -- hosts --------------------------------------------------------------------------------------
    def host(
        self,
        address: str | None,
        port: int | None,
        domain: str | None = None,
        transport: str | None = None,
    ) -> str | None:
        """``domain:port``, else ``address:port``; ``unix:PATH`` for unix sockets."""
        if transport == "unix" or (address is not None and address.startswith(("/", "@"))):
            if not address:
                return "unix:?"
            return "unix:" + (self.path(address) if address.startswith("/") else address)
        name = domain or address
        if not name:
            return None
        if port is None:
            return name
        if name.count(":") > 1 and not name.startswith("["):
            name = f"[{name}]"
        shown: str = str(port)
        if self.rules.fold_loopback_ephemeral_ports and port >= 32768 and _is_loopback(address or name):
            shown = "<ephemeral>"
        return f"{name}:{shown}"


def _mixed_sub(m: re.Match[str]) -> str:
    return "<rand>" if _looks_random(m.group(0)) else m.group(0)


def _tmpname_sub(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}{'' if m.group(3) else '.'}<rand>"


def _is_loopback(addr: str) -> bool:
    a = addr.strip("[]")
    return a.startswith("127.") or a in ("::1", "localhost") or a.startswith("::ffff:127.")


def _quote(arg: str) -> str:
    if arg and not any(c.isspace() or c in "\"'\\" for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
