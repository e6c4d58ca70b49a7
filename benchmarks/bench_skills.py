"""Skill verification: verdicts, verification time per skill, and the overhead over running it bare.

For each fixture skill (tests/skills/data), the bare baseline runs the same steps
``skill verify`` runs (every script with its sample inputs, then every SKILL.md code
block), unconfined and untraced, in a prepared workspace; the verification is one
``verify_skill`` with ``--repeat 1`` (both kinds of run, sandbox, capture, judge).

    .venv/bin/python benchmarks/bench_skills.py [--limit N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from spyglass.skills.spec import derive_spec
from spyglass.skills.standin import start_standin
from spyglass.skills.verify import verify_skill
from spyglass.skills.workspace import prepare_workspace, skill_scripts
from spyglass.store import Store

DATA = Path(__file__).resolve().parent.parent / "tests" / "skills" / "data"


def bare(skill: Path, proxy: str) -> float:
    """Seconds to run the skill's steps directly (no sandbox, no capture); HTTP goes to the
    loopback stand-in through the proxy variables, so nothing leaves the machine."""
    spec = derive_spec(skill)
    base = Path(tempfile.mkdtemp(prefix="bench-skill-"))
    try:
        total = 0.0
        modes = ["direct", "agent"] if skill_scripts(skill) else ["agent"]
        for mode in modes:
            ws = prepare_workspace(base / mode, skill, spec, mode)
            t0 = time.monotonic()
            env = {**os.environ, **ws.env, "http_proxy": proxy, "HTTP_PROXY": proxy, "NO_PROXY": "", "no_proxy": ""}
            for hook in ("PYTHONPATH", "NODE_OPTIONS"):  # bare: without the source-line hooks
                env.pop(hook, None)
            subprocess.run(ws.driver_argv(), cwd=ws.root, env=env, capture_output=True, timeout=300)
            total += time.monotonic() - t0
        return total
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=0, help="only the first N skills of each set")
    args = ap.parse_args()
    skills = []
    for group in ("benign", "malicious"):
        found = sorted(d for d in (DATA / group).iterdir() if (d / "SKILL.md").exists())
        skills += [(group, d) for d in (found[: args.limit] if args.limit else found)]
    store_dir = Path(tempfile.mkdtemp(prefix="bench-skill-store-"))
    store = Store(store_dir, create=True)
    standin = start_standin()
    proxy = f"http://127.0.0.1:{standin.port}"
    print(f"{'set':9} {'skill':22} {'verdict':11} {'verify s':>9} {'bare s':>8} {'overhead':>9}")
    tv = tb = 0.0
    try:
        for group, d in skills:
            # only benign skills run bare: a malicious one must never run unconfined
            b = bare(d, proxy) if group == "benign" else float("nan")
            t0 = time.monotonic()
            r = verify_skill(d, store)
            v = time.monotonic() - t0
            if b == b:
                tv, tb = tv + v, tb + b
                print(f"{group:9} {d.name:22} {r.verdict:11} {v:9.2f} {b:8.3f} {v / max(b, 1e-3):8.1f}x")
            else:
                print(f"{group:9} {d.name:22} {r.verdict:11} {v:9.2f} {'-':>8} {'-':>9}")
        print(f"{'benign':9} total{'':17} {'':11} {tv:9.2f} {tb:8.3f} {tv / max(tb, 1e-3):8.1f}x")
    finally:
        standin.close()
        shutil.rmtree(store_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
