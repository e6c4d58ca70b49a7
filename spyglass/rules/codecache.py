"""Compiled code of the rule engine's generated functions, kept between runs, sealed.

The engine generates one Python function per event type (spyglass/rules/compiler.py)
and compiling that source is most of what a run spends on its rules.  The source is
the same in every run with the same rules, policy, HOME and workspace, so its
compiled code object is kept here: ``<store>/cache/code-<rule set digest>.bin``
holds ``{sha256(interpreter magic, file name, mode, source): marshalled code}``.

A code object is code: an entry is trusted only under the same seal as the rule
cache's (:class:`spyglass.rules.cache.RuleCache`: an HMAC-SHA256 over the digest
and the bytes, under the store's own random key), checked before anything is
unmarshalled; a planted, copied, truncated or edited file is a miss, and every
function is then compiled from its source (and the file rewritten at the end of
the run).  The key of each code object is the digest of the very source it was
compiled from (and of the interpreter's bytecode magic), so a hit is the code that
``compile`` would return.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import threading
from pathlib import Path
from types import CodeType

from spyglass.rules.cache import RuleCache, prune

#: code objects kept per file (a run needs a few dozen; beyond this the file starts afresh, so a
#: store that saw many workloads reads about a megabyte at most at a start)
MAX_CODES = 512
_PREFIX = "code"


class CodeCache:
    """``compile`` for generated rule code, answered from the sealed store file when it can be."""

    def __init__(self, store_root: str | Path, rules_digest: str) -> None:
        self._cache = RuleCache(store_root, prefix=_PREFIX)
        self._digest = rules_digest
        self._lock = threading.Lock()
        self._known: dict[str, bytes] | None = None  # read at the first compile
        self._new: dict[str, bytes] = {}
        #: how many code objects came from the store's file, and how many were compiled (for tests)
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, bytes]:
        known = self._known
        if known is None:
            with self._lock:
                if self._known is None:
                    raw = self._cache.get_bytes(self._digest)  # None unless its seal checks out
                    found: object = None
                    if raw is not None:
                        try:
                            found = marshal.loads(raw)
                        except (EOFError, ValueError, TypeError):
                            found = None
                    ok = isinstance(found, dict) and all(
                        isinstance(k, str) and isinstance(v, bytes) for k, v in found.items()
                    )
                    self._known = found if ok else {}  # type: ignore[assignment]
                known = self._known
        assert known is not None
        return known

    def compile(self, source: str, filename: str, mode: str) -> CodeType:
        """What ``compile(source, filename, mode)`` returns."""
        head = importlib.util.MAGIC_NUMBER + f"\0{filename}\0{mode}\0".encode()
        key = hashlib.sha256(head + source.encode("utf-8", "surrogatepass")).hexdigest()
        data = self._load().get(key)
        stored = data is not None
        if data is None:
            data = self._new.get(key)  # compiled earlier in this run
        if data is not None:
            try:
                code = marshal.loads(data)
            except (EOFError, ValueError, TypeError):
                code = None
            if isinstance(code, CodeType):
                self.hits += stored
                return code
        code = compile(source, filename, mode)
        self.misses += 1
        self._new[key] = marshal.dumps(code)
        return code

    def save(self) -> bool:
        """Keep what was compiled in this run (nothing new: nothing written); False if not written."""
        if not self._new:
            return True
        known = dict(self._known or {})
        if len(known) + len(self._new) > MAX_CODES:
            known = {}
        known.update(self._new)
        if not self._cache.put_bytes(self._digest, marshal.dumps(known)):
            return False
        self._new = {}
        prune(self._cache)
        return True
