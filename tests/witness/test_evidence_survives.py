"""The evidence survives the agent: a daemon that re-chains the run after it ends, and `rm -rf` of the
run directory during the run.  Real processes under the real strace backend."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

# The daemon the agent leaves behind: once the run is over it drops every record that mentions the
# secret, re-chains both streams consistently and writes a matching checkpoint.  Without an anchor
# kept outside the run directory this rewrite verifies.
DAEMON = r'''
import hashlib, json, os, struct, sys, time, zlib
from pathlib import Path
store, done = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.time() + 120
run = None
while time.time() < deadline:
    runs = sorted((store / "runs").iterdir()) if (store / "runs").is_dir() else []
    if runs:
        run = runs[-1]
        meta = json.loads((run / "run.json").read_text())
        cp = run / "evidence" / "checkpoint.json"
        if meta["status"] != "running" and cp.exists() and json.loads(cp.read_text()).get("final"):
            break
    time.sleep(0.05)
def genesis(stream):
    return hashlib.sha256(f"spyglass-chain-v1:{run.name}:{stream}".encode()).hexdigest()
cp = json.loads((run / "evidence" / "checkpoint.json").read_text())
# events: block-sealed; one new block of the records kept, sealed from the genesis value
kept = [line for line in (run / "events.jsonl").read_bytes().splitlines()
        if not line.startswith(b'{"seal":') and b"id_rsa" not in line and b"cred-" not in line]
data = b"".join(k + b"\n" for k in kept)
head = hashlib.sha256(genesis("events").encode() + data).hexdigest()
crcs = struct.pack(f">{len(kept)}I", *map(zlib.crc32, kept)).hex()
seal = b'{"seal":{"crc32":"' + crcs.encode() + b'","chain":"' + head.encode() + b'"}}\n'
(run / "events.jsonl").write_bytes(data + seal)
cp["events"], cp["events_head"] = len(kept), head
# alerts: one chain value per record
head, kept = genesis("alerts"), []
for line in (run / "alerts.jsonl").read_bytes().splitlines():
    if b"id_rsa" in line or b"cred-" in line:
        continue
    canonical = line[: -len(b',"chain":""}') - 64] + b"}"
    h = hashlib.sha256(head.encode()); h.update(canonical); head = h.hexdigest()
    kept.append(canonical[:-1] + b',"chain":"' + head.encode() + b'"}')
(run / "alerts.jsonl").write_bytes(b"".join(k + b"\n" for k in kept))
cp["alerts"], cp["alerts_head"] = len(kept), head
(run / "evidence" / "checkpoint.json").write_text(json.dumps(cp, indent=2))
meta = json.loads((run / "run.json").read_text())
meta["counts"]["alerts"] = 0
meta["extra"].pop("max_level", None)
(run / "run.json").write_text(json.dumps(meta, indent=2))
done.write_text(run.name)
'''


def _wait_for(path: Path, timeout: float = 120, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        why = log.read_text() if log is not None and log.exists() else ""
        assert time.monotonic() < deadline, f"{path} never appeared {why}"
        time.sleep(0.05)


def test_a_daemon_that_rechains_the_run_afterwards_is_caught(setup: Any, tmp_path: Path) -> None:
    home = Path(setup.env["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("secret\n")
    (tmp_path / "daemon.py").write_text(DAEMON)
    done = tmp_path / "done"
    script = (f"cat $HOME/.ssh/id_rsa >/dev/null; setsid {setup.python} {tmp_path}/daemon.py {setup.store} {done} "
              f"</dev/null >{tmp_path}/daemon.log 2>&1 &")
    # without seccomp, a daemon that outlives the run keeps working once the tracer detaches
    res = setup.run(script, "--no-seccomp")
    anchor = next(line.split()[2] for line in res.stderr.splitlines() if line.startswith("spyglass: anchor "))
    _wait_for(done, log=tmp_path / "daemon.log")
    shown = setup.spyglass("show", "--store", str(setup.store)).stdout  # the rewrite took, and show says so
    assert "EVIDENCE DOES NOT MATCH ITS ANCHOR" in shown and "Alerts: none" not in shown, shown
    ver = setup.spyglass("verify", "--store", str(setup.store))
    assert ver.returncode == 3 and "rewritten after the run" in ver.stdout, ver.stdout
    assert "not the one anchored at the end of the run" in ver.stdout
    # the anchor printed on the terminal catches it too, even with the index rewritten or lost
    (setup.store / "index.sqlite").unlink()
    ver = setup.spyglass("verify", "--store", str(setup.store), "--anchor", anchor)
    assert ver.returncode == 3 and "--anchor" in ver.stdout, ver.stdout


def test_benign_twin_a_finished_run_matches_its_anchor(setup: Any) -> None:
    res = setup.run("echo ok > out.txt")
    anchor = next(line.split()[2] for line in res.stderr.splitlines() if line.startswith("spyglass: anchor "))
    data = json.loads(setup.spyglass("show", "--store", str(setup.store), "--format", "json").stdout)
    assert data["anchor"] == anchor == data["run"]["extra"]["anchor"]
    for extra in ([], ["--anchor", anchor]):
        ver = setup.spyglass("verify", "--store", str(setup.store), *extra)
        assert ver.returncode == 0 and "anchor: matches" in ver.stdout, ver.stdout


def test_rm_rf_of_the_run_directory_during_the_run_is_detected_and_the_run_kept(setup: Any) -> None:
    script = ('for i in 1 2 3; do cat /etc/hostname > /dev/null; done; '
              f'rm -rf {setup.store}/runs/*; echo after > after.txt')
    res = setup.run(script)
    # the writer may notice the files going before the directory does: either way it says so
    assert "during the run; made it again" in res.stderr, res.stderr
    data = json.loads(setup.spyglass("show", "--store", str(setup.store), "--format", "json").stdout)
    run = data["run"]
    assert run["status"] == "evidence-incomplete" and "deleted" in run["extra"]["run_dir"]["problem"]
    written = [p for paths in data["files_written"].values() for p in paths]
    assert any(p.endswith("/ws/after.txt") for p in written), written  # recorded after the deletion
    assert run["counts"]["events"] > 10
    shown = setup.spyglass("show", "--store", str(setup.store)).stdout
    assert "the run directory was" in shown and "during the run: restored events and alerts" in shown
    alerts = setup.alerts()
    assert any(a["rule_id"] == "witness-tamper" for a in alerts)  # the deletion itself, kept too
    ver = setup.spyglass("verify", "--store", str(setup.store))
    assert ver.returncode == 4 and "evidence is incomplete" in ver.stdout, ver.stdout


def test_renaming_the_run_directory_aside_is_detected(setup: Any) -> None:
    script = f'd=$(ls -d {setup.store}/runs/*); mv "$d" "$d.aside"; echo x > "$d.aside/events.jsonl"'
    res = setup.run(script)
    assert "during the run" in res.stderr, res.stderr
    run = json.loads(setup.spyglass("show", "--store", str(setup.store), "--format", "json").stdout)["run"]
    assert run["status"] == "evidence-incomplete" and run["counts"]["events"] > 3


def test_a_symlink_put_in_place_of_the_run_directory_is_detected(setup: Any) -> None:
    # the swap in one call, as an attacker would do it: renameat2(RENAME_EXCHANGE) trades the run directory
    # for a symlink to it, so no check of the writer's can fall between a `mv` and an `ln -s` (a clean-clone
    # CI run once found the directory gone between the two and made it again, and the agent's `ln -s` failed)
    swap = ("import ctypes, os, sys; d = sys.argv[1]; a = d + '.aside'; os.symlink(a, a); "
            "libc = ctypes.CDLL(None, use_errno=True); "
            "assert libc.renameat2(-100, a.encode(), -100, d.encode(), 2) == 0, os.strerror(ctypes.get_errno())")
    script = f'd=$(ls -d {setup.store}/runs/*); {setup.python} -c "{swap}" "$d"; echo more > m.txt'
    res = setup.run(script)
    assert "was replaced during the run" in res.stderr, res.stderr
    run = json.loads(setup.spyglass("show", "--store", str(setup.store), "--format", "json").stdout)["run"]
    assert run["status"] == "evidence-incomplete"
    assert not (setup.store / "runs" / run["id"]).is_symlink()
    assert any(a["rule_id"] == "witness-tamper" for a in setup.alerts())  # the exchange itself, on the store
