"""An agent forges the store's compiled-code cache for the next run (spyglass/rules/codecache.py).

A code entry is code the next run's monitor executes, so it is guarded like the rule cache:
sealed by an HMAC under ``<store>/cache/rules.key``.  A same-user agent outside the sandbox
can read that key and write a well-sealed entry; the next run then uses it (docs/threat-model.md).
What must hold is that the run doing it says so: the key read is ``witness-key-read`` and the
write ``witness-tamper`` (critical), whichever name leads there.  Real processes under each
capture backend; the benign twin (a run that only works in its workspace) stays silent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spyglass.rules.cache import RuleCache

FORGE = r"""
import glob, hashlib, hmac, marshal, os, sys
cache = sys.argv[1]
key = open(os.path.join(cache, "rules.key"), "rb").read()
(entry,) = glob.glob(os.path.join(cache, "code-*.bin"))
digest = os.path.basename(entry)[len("code-"):-len(".bin")]
known = marshal.loads(open(entry, "rb").read()[32:])
evil = marshal.dumps(compile("open(%r, 'w').write('ran')" % sys.argv[2], "<forged>", "exec"))
payload = marshal.dumps({k: evil for k in known})
mac = hmac.new(key, b"spyglass-rule-cache-v1\0code\0" + digest.encode() + b"\0" + payload, hashlib.sha256)
with open(sys.argv[3], "wb") as f:
    f.write(mac.digest() + payload)
os.replace(sys.argv[3], entry)
print(digest)
"""


def witness(alerts: list[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in alerts:
        if str(a["rule_id"]).startswith("witness-"):
            out.setdefault(str(a["rule_id"]), set()).add(str(a["level"]))
    return out


@pytest.mark.parametrize("via", ["direct", "symlink"])
def test_forging_a_sealed_code_entry_is_seen_in_the_run_that_does_it(
    setup: Any, tmp_path: Path, via: str
) -> None:
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0  # writes the code cache and its key
    (setup.ws / "forge.py").write_text(FORGE)
    marker = tmp_path / "ran"
    cache = f"{store}/cache"
    if via == "symlink":  # the cache reached by another name, the new file written beside it
        prep, cache, tmp = f"ln -s {store}/cache c && ", "c", "c/.tmp-forged"
    else:
        prep, tmp = "", f"{store}/cache/.tmp-forged"
    res = setup.run(f"{prep}{setup.python} forge.py {cache} {marker} {tmp}", store=store)
    digest = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    assert len(digest) == 64, res.stderr
    # the attack is real: the next run's monitor would accept the entry (it checks the seal only)
    assert RuleCache(store, prefix="code").get_bytes(digest) is not None
    found = witness(setup.alerts(store=store))
    assert found.get("witness-key-read") == {"high"}, (found, res.stderr)
    assert found.get("witness-tamper") == {"critical"}, (found, res.stderr)


def test_benign_twin_a_second_run_working_in_its_workspace_is_silent(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0
    res = setup.run("mkdir -p cache && echo x > cache/code-x.bin && cat cache/code-x.bin", store=store)
    assert res.returncode == 0, res.stderr
    assert witness(setup.alerts(store=store)) == {}


def test_a_sandboxed_agent_cannot_reach_the_cache_or_its_key(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0
    key = (store / "cache" / "rules.key").read_bytes()
    res = setup.run(f"cat {store}/cache/rules.key; echo forged > {store}/cache/code-forged.bin; "
                    f"ls {store}/cache", "--sandbox", store=store)
    if "sandbox" in res.stderr and res.returncode == 5:
        pytest.skip(f"no sandbox here: {res.stderr.strip().splitlines()[-1]}")
    assert not (store / "cache" / "code-forged.bin").exists(), res.stderr
    assert (store / "cache" / "rules.key").read_bytes() == key
    assert "rules.key" not in res.stdout  # not even listed
    assert "witness-tamper" not in {str(a["rule_id"]) for a in setup.alerts(store=store)}
