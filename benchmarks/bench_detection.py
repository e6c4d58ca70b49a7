"""Benchmark: detection quality on the attack corpus (tests/attacks).

Plays every scenario and its benign twin under the real strace backend
(`spyglass run`, loopback only) and prints, per class and overall:

* recall at the expected level: attacks that raised an alert at or above the
  level a security engineer demands for them (scenario.expect);
* recall and precision at medium, high and critical: an attack counts as
  caught at L when its highest alert is at L or above; a benign twin counts as
  a false alarm at L likewise; precision = caught / (caught + false alarms);
* the misses and false alarms by name.

Usage: python benchmarks/bench_detection.py [--workers 3] [--only ID ...] [--format json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.attacks import corpus
from tests.attacks.scenarios import SCENARIOS

LEVELS = ("medium", "high", "critical")


def score(results: list[corpus.Result]) -> dict[str, dict[str, object]]:
    by_cls: dict[str, list[corpus.Result]] = defaultdict(list)
    for r in results:
        by_cls[r.scenario.cls].append(r)
        by_cls["ALL"].append(r)
    out: dict[str, dict[str, object]] = {}
    for cls, rs in sorted(by_cls.items(), key=lambda kv: (kv[0] == "ALL", kv[0])):
        attacks = [r for r in rs if r.variant == "attack"]
        benign = [r for r in rs if r.variant == "benign"]
        row: dict[str, object] = {"attacks": len(attacks), "benign": len(benign)}
        hit = [r for r in attacks if corpus.rank(r.max_level) >= corpus.rank(r.scenario.expect)]
        row["recall@expected"] = round(len(hit) / len(attacks), 3) if attacks else None
        for lv in LEVELS:
            tp = sum(1 for r in attacks if corpus.rank(r.max_level) >= corpus.rank(lv))
            fp = sum(1 for r in benign if corpus.rank(r.max_level) >= corpus.rank(lv))
            row[f"recall@{lv}"] = round(tp / len(attacks), 3) if attacks else None
            row[f"precision@{lv}"] = round(tp / (tp + fp), 3) if tp + fp else None
            row[f"false_alarms@{lv}"] = fp
        row["missed"] = [r.scenario.id for r in attacks if r not in hit]
        row["noisy_benign"] = [r.scenario.id for r in benign if r.loud("medium")]
        out[cls] = row
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None, help="scenario ids")
    ap.add_argument("--format", choices=["text", "json"], default="text")
    args = ap.parse_args()
    scs = [s for s in SCENARIOS if not args.only or s.id in args.only]
    t0 = time.monotonic()
    results = corpus.play(scs, workers=args.workers)
    secs = time.monotonic() - t0
    table = score(results)
    if args.format == "json":
        print(json.dumps({"seconds": round(secs, 1), "runs": len(results), "classes": table}, indent=2))
        return 0
    print(f"{len(scs)} scenarios x 2 variants = {len(results)} runs in {secs:.0f}s ({args.workers} workers)")
    head = f"{'class':18s} {'n':>3s} {'rec@exp':>7s}" + "".join(
        f" {'rec@' + lv[:4]:>8s} {'prec@' + lv[:4]:>9s} {'FP':>3s}" for lv in LEVELS)
    print(head)
    for cls, row in table.items():
        line = f"{cls:18s} {row['attacks']:>3} {row['recall@expected']!s:>7s}"
        for lv in LEVELS:
            line += f" {row[f'recall@{lv}']!s:>8s} {row[f'precision@{lv}']!s:>9s} {row[f'false_alarms@{lv}']!s:>3s}"
        print(line)
    allrow = table["ALL"]
    print("missed at the expected level:", ", ".join(allrow["missed"]) or "none")  # type: ignore[arg-type]
    print("benign twins with alerts at medium+:", ", ".join(allrow["noisy_benign"]) or "none")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
