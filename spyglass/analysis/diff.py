"""Run-versus-run resource diff: edges only in A, only in B, and weight changes."""

from __future__ import annotations

from typing import Any

import msgspec

from spyglass.analysis.profile import KINDS, Profile


class EdgeCount(msgspec.Struct, frozen=True):
    name: str
    op: str
    count: int


class EdgeChange(msgspec.Struct, frozen=True):
    name: str
    op: str
    count_a: int
    count_b: int

    @property
    def delta(self) -> int:
        return self.count_b - self.count_a


class KindDiff(msgspec.Struct):
    only_a: list[EdgeCount] = msgspec.field(default_factory=list)
    only_b: list[EdgeCount] = msgspec.field(default_factory=list)
    changed: list[EdgeChange] = msgspec.field(default_factory=list)
    same: int = 0

    def __bool__(self) -> bool:
        return bool(self.only_a or self.only_b or self.changed)


class ProfileDiff(msgspec.Struct):
    run_a: str
    run_b: str
    kinds: dict[str, KindDiff]

    @property
    def identical(self) -> bool:
        return not any(self.kinds.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_a": self.run_a, "run_b": self.run_b, "identical": self.identical}
        for kind, d in self.kinds.items():
            out[kind] = {
                "only_a": [msgspec.structs.asdict(e) for e in d.only_a],
                "only_b": [msgspec.structs.asdict(e) for e in d.only_b],
                "changed": [{**msgspec.structs.asdict(c), "delta": c.delta} for c in d.changed],
                "unchanged": d.same,
            }
        return out


def diff_profiles(a: Profile, b: Profile) -> ProfileDiff:
    """What B did that A did not, what A did that B did not, and what changed in weight."""
    kinds: dict[str, KindDiff] = {}
    for kind in KINDS:
        ea, eb = a.edges[kind], b.edges[kind]
        d = KindDiff()
        for key in sorted(ea.keys() | eb.keys()):
            ca, cb = ea.get(key, 0), eb.get(key, 0)
            if ca and not cb:
                d.only_a.append(EdgeCount(key[0], key[1], ca))
            elif cb and not ca:
                d.only_b.append(EdgeCount(key[0], key[1], cb))
            elif ca != cb:
                d.changed.append(EdgeChange(key[0], key[1], ca, cb))
            else:
                d.same += 1
        d.only_a.sort(key=lambda e: (-e.count, e.name, e.op))
        d.only_b.sort(key=lambda e: (-e.count, e.name, e.op))
        d.changed.sort(key=lambda c: (-abs(c.delta), c.name, c.op))
        kinds[kind] = d
    return ProfileDiff(a.run_id, b.run_id, kinds)


def format_diff_text(d: ProfileDiff, limit: int = 50) -> str:
    lines = [f"--- {d.run_a}", f"+++ {d.run_b}"]
    if d.identical:
        lines.append("no differences in commands, files or hosts")
        return "\n".join(lines)
    for kind, kd in d.kinds.items():
        if not kd:
            continue
        lines.append(f"\n{kind}s:")
        for e in kd.only_a[:limit]:
            lines.append(f"  - {e.op:<9} {e.name}  (×{e.count})")
        if len(kd.only_a) > limit:
            lines.append(f"  - … {len(kd.only_a) - limit} more only in A")
        for e in kd.only_b[:limit]:
            lines.append(f"  + {e.op:<9} {e.name}  (×{e.count})")
        if len(kd.only_b) > limit:
            lines.append(f"  + … {len(kd.only_b) - limit} more only in B")
        for c in kd.changed[:limit]:
            lines.append(f"  ~ {c.op:<9} {c.name}  ×{c.count_a} → ×{c.count_b}")
        if len(kd.changed) > limit:
            lines.append(f"  ~ … {len(kd.changed) - limit} more changed")
    return "\n".join(lines)
