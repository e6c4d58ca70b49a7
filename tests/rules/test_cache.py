"""The rule cache: hits, a miss for each part of its key, and an agent that tampers with it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from spyglass.policy import Policy, load_policy
from spyglass.rules import cache as rcache
from spyglass.rules.cache import RuleCache, cache_key, load_rules, remember
from spyglass.rules.engine import RuleEngine
from spyglass.rules.sources import RuleSources, read_sources
from spyglass.store import RunReader, Store
from spyglass.witness.guard import Protected

HOME = "/home/someone"


def _fill(store: Path, policy: Policy, home: str = HOME) -> tuple[Any, str]:
    rs, key, hit = load_rules(policy, home, store)
    assert not hit
    RuleEngine(rs, policy, home=home)  # compiles them all: they are good
    remember(store, key, rs)
    return rs, key


def test_a_second_load_hits_and_gives_the_same_rules(tmp_path: Path) -> None:
    pol = Policy.default(tmp_path)
    rs, key = _fill(tmp_path / "store", pol)
    again, key2, hit = load_rules(pol, HOME, tmp_path / "store")
    assert hit and key2 == key
    assert [r.id for r in again.rules] == [r.id for r in rs.rules]
    assert again.library.lists == rs.library.lists
    # another working directory (the default policy's base) is the same policy: still a hit
    assert load_rules(Policy.default(tmp_path / "elsewhere"), HOME, tmp_path / "store")[2]


def _policy(tmp_path: Path, text: str) -> Policy:
    f = tmp_path / "policy.yaml"
    f.write_text(text)
    return load_policy(f, tmp_path)


def test_each_part_of_the_key_changes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text("id: my-rule\nlevel: low\ndetection:\n  s: {type: file.read, file.path|endswith: /x}\n"
                     "condition: s\n")
    pol = _policy(tmp_path, f"rules:\n  paths: [{rules}]\n")
    src = read_sources([rules])
    base = cache_key(src, pol, HOME)
    assert cache_key(read_sources([rules]), pol, HOME) == base  # stable
    # a rule file's text
    rules.write_text(rules.read_text().replace("level: low", "level: high"))
    assert cache_key(read_sources([rules]), pol, HOME) != base
    # the pack: one of its texts
    packed = RuleSources(texts=[(n, t + "\n# changed\n") if n.endswith("lists.yaml") else (n, t) for n, t in src.texts])
    assert cache_key(packed, pol, HOME) != base
    # a rule file's name (messages name it)
    assert cache_key(RuleSources(texts=[("x" + n, t) for n, t in src.texts]), pol, HOME) != base
    # the policy's settings
    other = _policy(tmp_path, f"rules:\n  paths: [{rules}]\n  disable: [cred-secret-read]\n")
    assert cache_key(src, other, HOME) != base
    assert cache_key(src, msgspec.structs.replace(pol, secrets=("~/.mine",)), HOME) != base
    # HOME
    assert cache_key(src, pol, "/home/other") != base
    # spyglass's version, and its rule and policy code
    monkeypatch.setattr(rcache, "__version__", "99.0")
    assert cache_key(src, pol, HOME) != base
    monkeypatch.undo()
    assert cache_key(src, pol, HOME) == base
    code = Path(rcache.__file__).parent / "modifiers.py"
    st = code.stat()
    try:
        os.utime(code, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert cache_key(src, pol, HOME) != base
    finally:
        os.utime(code, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_workspace_enters_at_start_not_through_the_cache(tmp_path: Path) -> None:
    """A hit in another workspace still judges writes against the run's own workspace."""
    from spyglass.events import Event
    from spyglass.pipeline import RunContext

    store = tmp_path / "store"
    pol = Policy.default(tmp_path)
    _fill(store, pol)
    rs, _, hit = load_rules(pol, HOME, store)
    assert hit
    alerts = {}
    for ws in ("/work/a", "/work/b"):
        eng = RuleEngine(rs, pol, home=HOME, validated=True)
        eng.start(RunContext(root_cwd=ws, workspace=[ws], home=HOME))
        eng.event(Event(type="file.write", pid=10, ts=1, seq=1, path="/work/a/.git/hooks/pre-commit", ok=True))
        alerts[ws] = {a.rule_id for a in eng.alerts}
    assert alerts["/work/a"] != alerts["/work/b"], alerts


def test_entries_that_fail_their_check_are_misses_and_never_unpickled(tmp_path: Path) -> None:
    store = tmp_path / "store"
    pol = Policy.default(tmp_path)
    _, key = _fill(store, pol)
    cache = RuleCache(store)
    entry = cache.dir / f"rules-{key}.bin"
    good = entry.read_bytes()
    marker = tmp_path / "pwned"

    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    for bad in (
        good[:-1] + bytes([good[-1] ^ 1]),  # one bit of the payload
        bytes(32) + good[32:],  # the MAC
        good[:20],  # truncated
        os.urandom(32) + pickle.dumps(Boom()),  # a planted pickle that runs a command
    ):
        entry.write_bytes(bad)
        assert cache.get(key) is None
        assert load_rules(pol, HOME, store)[2] is False
    assert not marker.exists()
    # an entry good for another key (another policy) is no good for this one
    other = msgspec.structs.replace(pol, secrets=("~/.other",))
    _, key2 = _fill(store, other)
    entry.write_bytes((cache.dir / f"rules-{key2}.bin").read_bytes())
    assert cache.get(key) is None
    # a new key file (the old one deleted or replaced) voids every entry
    entry.write_bytes(good)
    assert cache.get(key) is not None
    (cache.dir / rcache.KEY_FILE).write_bytes(os.urandom(32))
    assert cache.get(key) is None
    # a key others may read, or a link to a key elsewhere, is no key: nothing hits until a new one is made
    key_file = cache.dir / rcache.KEY_FILE
    key_file.chmod(0o644)
    assert cache._secret(create=False) is None
    planted = tmp_path / "planted.key"
    planted.write_bytes(os.urandom(32))
    planted.chmod(0o600)
    key_file.unlink()
    key_file.symlink_to(planted)
    assert cache._secret(create=False) is None
    fresh = cache._secret(create=True)
    assert fresh is not None and fresh != planted.read_bytes() and not key_file.is_symlink()


def test_the_cache_key_is_a_secret_of_the_witness_guard(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _fill(store, Policy.default(tmp_path))
    key_file = rcache.cache_dir(store) / rcache.KEY_FILE
    assert key_file.stat().st_mode & 0o077 == 0
    prot = Protected.for_run(store)
    assert prot.secret(str(key_file)) is not None
    assert prot.which(str(rcache.cache_dir(store) / "rules-x.bin")) is not None


def _spyglass(store: Path, *args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPYGLASS_STORE": str(store), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env.pop("SPYGLASS_POLICY", None)
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


def test_an_agent_that_poisons_the_cache_does_not_weaken_the_next_run(tmp_path: Path) -> None:
    """The agent (a real process, recorded) overwrites every cache entry with a rule set that has
    no rules, and copies in an entry made for a policy that disables the secret rule; the next
    run still reads with the real rules, and the poisoning run is a witness-tamper alert."""
    store, home, work = tmp_path / "store", tmp_path / "home", tmp_path / "work"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("not a key")
    work.mkdir()
    read_key = ("run", "-q", "--fail-on", "high", "--", "cat", str(home / ".ssh" / "id_rsa"))
    first = _spyglass(store, *read_key, cwd=work, home=home)
    assert first.returncode == 6, first.stderr
    weak = tmp_path / "weak.yaml"
    weak.write_text("rules:\n  disable: [cred-secret-read]\n")
    made = _spyglass(store, "run", "-q", "--policy", str(weak), "--", "true", cwd=work, home=home)
    assert made.returncode == 0, made.stderr
    entries = sorted(rcache.cache_dir(store).glob("rules-*.bin"), key=lambda p: p.stat().st_mtime_ns)
    assert len(entries) == 2
    weak_entry, real_entry = entries[-1], entries[0]
    key_file = rcache.cache_dir(store) / rcache.KEY_FILE
    poison = (f"import shutil; open({str(key_file)!r}, 'rb').read(); "
              f"shutil.copyfile({str(weak_entry)!r}, {str(real_entry)!r})")
    attack = _spyglass(store, "run", "-q", "--", sys.executable, "-c", poison, cwd=work, home=home)
    assert attack.returncode == 0, attack.stderr
    reader = RunReader(Store(store), Store(store).resolve("latest"))
    seen = {a.rule_id for a in reader.alerts()}
    assert {"witness-tamper", "witness-key-read"} <= seen, seen  # the write, and the read of the key
    again = _spyglass(store, *read_key, cwd=work, home=home)
    assert again.returncode == 6, again.stderr
    reader = RunReader(Store(store), Store(store).resolve("latest"))
    assert "cred-secret-read" in {a.rule_id for a in reader.alerts()}


def test_a_policy_file_is_parsed_once_and_a_forged_entry_is_refused(tmp_path: Path) -> None:
    """The store keeps parsed policies under the rule cache's seal: the same text at the same
    place is not parsed again; an entry planted with another policy (a weaker mode, no secrets)
    fails its seal and the file's own text is parsed; a bad policy is an error as always."""
    from spyglass.policy.loader import PolicyError, parse_policy
    from spyglass.rules.cache import policy_parser

    store = tmp_path / "store"
    f = tmp_path / "policy.yaml"
    f.write_text("mode: enforce\nsecrets: ['~/.mine/**']\n")
    first = load_policy(f, tmp_path, parse=policy_parser(store))
    (entry,) = (store / "cache").glob("policy-*.bin")
    parse_policy.cache_clear()
    again = load_policy(f, tmp_path, parse=policy_parser(store))
    assert again == first and again.mode == "enforce" and parse_policy.cache_info().misses == 0  # from the store
    weak = msgspec.structs.replace(first, mode="observe", secrets=())
    entry.write_bytes(b"\0" * 32 + pickle.dumps(weak))
    got = load_policy(f, tmp_path, parse=policy_parser(store))
    assert got.mode == "enforce" and got.secrets == ("~/.mine/**",)
    f.write_text("mode: sometimes\n")
    with pytest.raises(PolicyError):
        load_policy(f, tmp_path, parse=policy_parser(store))
