"""The code cache: generated rule code compiled once and kept sealed in the store; a tampered,
planted or substituted file is never unmarshalled into code that runs (it is a miss)."""

from __future__ import annotations

import marshal
import shutil
from pathlib import Path

from spyglass.events import Event
from spyglass.pipeline import RunContext
from spyglass.policy import Policy
from spyglass.rules.cache import RuleCache
from spyglass.rules.codecache import CodeCache
from spyglass.rules.engine import RuleEngine
from spyglass.rules.ruleset import load_ruleset

HOME = "/home/u"
WS = "/work/task"
DIGEST = "ab" * 32


def _events() -> list[Event]:
    return [
        Event(type="process.start", pid=10, ppid=1, ts=1, seq=1),
        Event(type="process.exec", pid=10, ts=2, seq=2, exe="/usr/bin/curl", argv=["curl", "http://x.example"],
              ok=True),
        Event(type="file.read", pid=10, ts=3, seq=3, path=f"{HOME}/.ssh/id_rsa", ok=True),
        Event(type="file.write", pid=10, ts=4, seq=4, path=f"{HOME}/.bashrc", ok=True),
        Event(type="net.connect", pid=10, ts=5, seq=5, address="203.0.113.9", port=443, ok=True),
        Event(type="process.exit", pid=10, ts=6, seq=6, exit_code=0),
    ]


def _alerts(store: Path | None) -> tuple[list[tuple[str, int]], CodeCache | None]:
    pol = Policy.default(WS)
    engine = RuleEngine(load_ruleset(pol), pol, home=HOME, validated=True)
    cache = CodeCache(store, DIGEST) if store is not None else None
    engine.code_cache = cache
    engine.start(RunContext(root_cwd=WS, workspace=[WS], home=HOME))
    engine.warm()
    for ev in _events():
        engine.event(ev)
    return sorted((a.rule_id, a.pid) for a in engine.alerts), cache


def test_a_second_run_compiles_nothing_and_raises_the_same_alerts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    expected, _ = _alerts(None)
    assert expected
    first, cache = _alerts(store)
    assert first == expected and cache is not None and cache.misses > 0
    assert cache.save()
    again, cache2 = _alerts(store)
    assert again == expected and cache2 is not None
    assert cache2.misses == 0 and cache2.hits > 0
    assert cache2.save()  # nothing new: nothing to write


def _filled(tmp_path: Path) -> tuple[Path, Path, list[tuple[str, int]]]:
    store = tmp_path / "store"
    expected, cache = _alerts(store)
    assert cache is not None and cache.save()
    (entry,) = (store / "cache").glob("code-*.bin")
    return store, entry, expected


def test_an_edited_entry_is_refused_and_compiled_again(tmp_path: Path) -> None:
    store, entry, expected = _filled(tmp_path)
    data = bytearray(entry.read_bytes())
    data[-40] ^= 0x01  # one bit of the marshalled code
    entry.write_bytes(bytes(data))
    again, cache = _alerts(store)
    assert again == expected and cache is not None and cache.hits == 0 and cache.misses > 0
    assert cache.save()  # rewritten under the seal
    assert _alerts(store)[1].misses == 0  # type: ignore[union-attr]


def test_a_planted_entry_with_forged_code_never_runs(tmp_path: Path) -> None:
    """An agent that writes code objects of its own under every key (without the store's key) gets
    no code run: the file fails its seal before anything is unmarshalled."""
    store, entry, expected = _filled(tmp_path)
    mine = tmp_path / "pwned"
    evil = compile(f"open({str(mine)!r}, 'w').write('x')", "<evil>", "exec")
    known = marshal.loads(entry.read_bytes()[32:])
    forged = {k: marshal.dumps(evil) for k in known}
    entry.write_bytes(b"\0" * 32 + marshal.dumps(forged))
    again, cache = _alerts(store)
    assert again == expected and not mine.exists()
    assert cache is not None and cache.hits == 0
    # nor with no key at all in the store (a planted cache directory)
    (store / "cache" / "rules.key").unlink()
    entry.write_bytes(b"\0" * 32 + marshal.dumps(forged))
    again, cache = _alerts(store)
    assert again == expected and not mine.exists() and cache is not None and cache.hits == 0


def test_a_rule_cache_entry_is_no_code_entry(tmp_path: Path) -> None:
    """The same digest and the same key seal both kinds: the kind is in the seal, so an entry of
    one kind copied over the other fails its check."""
    store, entry, expected = _filled(tmp_path)
    rules = RuleCache(store)
    assert rules.put(DIGEST, {"some": "value"})
    shutil.copy(store / "cache" / f"rules-{DIGEST}.bin", entry)
    assert RuleCache(store, prefix="code").get_bytes(DIGEST) is None
    again, cache = _alerts(store)
    assert again == expected and cache is not None and cache.hits == 0
