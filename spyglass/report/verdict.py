"""What the HTML report's first screen says, and how it names spyglass's own processes and sockets.

* The verdict: alerts by level, the gate's result (when the run records
  one), and the evidence status (the hash chain and checkpoint verified).
* Lineages show the sandbox's launchers (bwrap, the proxy relay) once, as a
  label, instead of repeating the agent's command inside each of them.
* Hosts are told apart from spyglass's plumbing (the sandbox's proxy relay)
  and local IPC (unix sockets such as nscd's), which did not bypass anything.
"""

from __future__ import annotations

from typing import Any

from spyglass.events import LEVELS
from spyglass.report.describe import host_role, launcher_name


def lineage_view(entries: list[dict[str, Any]], argvs: list[list[str] | None]) -> list[dict[str, Any]]:
    """ENTRIES (root first) with runs of sandbox launchers folded into one labelled entry."""
    out: list[dict[str, Any]] = []
    for entry, argv in zip(entries, argvs, strict=True):
        name = launcher_name(argv)
        if name is None:
            out.append({**entry, "label": None})
            continue
        short = name.removeprefix("sandbox: ")
        if out and out[-1].get("label"):
            if short not in out[-1]["label"]:
                out[-1]["label"] += f" › {short}"
            continue
        out.append({**entry, "cmd": "", "label": f"sandbox: {short}"})
    return out


def host_rows(hosts: list[Any], meta: Any) -> list[dict[str, Any]]:
    rows = []
    for h in hosts:
        role = host_role(h.address, h.port, meta)
        rows.append({"h": h, "role": role,
                     "route": {"plumbing": "spyglass plumbing: the sandbox's proxy relay",
                               "ipc": "local IPC (unix socket)"}.get(role)})
    return sorted(rows, key=lambda r: (r["role"] != "host", r["h"].decision != "deny", -r["h"].count))


def verdict(alerts_by_level: list[tuple[str, int]], verify: dict[str, Any] | None, gate: Any) -> dict[str, Any]:
    worst = alerts_by_level[0][0] if alerts_by_level else None
    if isinstance(gate, dict) and "passed" in gate:
        gate_text, gate_cls = ("passed", "ok") if gate.get("passed") else ("failed", "bad")
    else:
        gate_text, gate_cls = "not checked", "na"
    status = verify.get("status") if verify else None
    ev_cls = "ok" if status == "verified" else ("na" if status is None else "bad")
    return {
        "alerts": alerts_by_level,
        "alerts_cls": "ok" if not worst else ("bad" if LEVELS.index(worst) >= LEVELS.index("high") else "warn"),
        "gate": gate_text,
        "gate_cls": gate_cls,
        "evidence": status or "not checked",
        "evidence_cls": ev_cls,
    }
