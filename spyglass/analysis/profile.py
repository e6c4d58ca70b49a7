"""The profile of a run: a star graph with the run at the centre.

Leaves are resources of three kinds: ``command`` (the executable and its
normalized arguments), ``file`` (a normalized path) and ``host``
(``domain:port``, else ``address:port``).  An edge joins the run to a leaf for
each kind of access, labelled with its op, weighted by the number of accesses.
So a file read twice and written once is one leaf with two edges,
``read ×2`` and ``write ×1``; the profile stores ``(name, op) -> count`` per kind.

A profile is built in one pass over the event iterator and holds only these
counters (plus the run's process ids for the ``pid`` fold), never the events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from spyglass.analysis.normalize import Normalizer, NormalizeRules, RunPlaces
from spyglass.events import Event

if TYPE_CHECKING:
    from spyglass.store import RunMeta, RunReader

KINDS: Final = ("command", "file", "host")

#: event type -> op on ``file.path``
FILE_OPS: Final[dict[str, str]] = {
    "file.read": "read",
    "file.write": "write",
    "file.create": "create",
    "file.delete": "delete",
    "file.truncate": "write",
    "file.mkdir": "mkdir",
    "file.chmod": "chmod",
    "file.chown": "chown",
    "file.rename": "rename",
    "file.link": "link",
    "file.symlink": "link",
}
#: event type -> op on ``file.target`` (the new name)
TARGET_OPS: Final[dict[str, str]] = {
    "file.rename": "rename-to",
    "file.link": "link",
    "file.symlink": "link",
}
HOST_OPS: Final[dict[str, str]] = {
    "net.connect": "connect",
    "net.send": "send",
    "net.bind": "bind",
    "net.listen": "listen",
}

Edge = tuple[str, str]  # (resource name, op)


class Profile(msgspec.Struct):
    """Access counts of one run, per resource kind: ``edges[kind][(name, op)] = count``."""

    run_id: str = ""
    task: str | None = None
    agent_id: str | None = None
    edges: dict[str, dict[Edge, int]] = msgspec.field(default_factory=lambda: {k: {} for k in KINDS})
    #: accesses sorted into a dropped noise class: class -> count
    noise: dict[str, int] = msgspec.field(default_factory=dict)
    #: events that are not resource accesses (process.start, priv.change ...): type -> count
    other: dict[str, int] = msgspec.field(default_factory=dict)
    #: failed accesses left out (``include_failed`` off)
    failed: int = 0
    events: int = 0
    #: placeholder -> the directory it stands for in this run
    places: dict[str, str] = msgspec.field(default_factory=dict)

    def add(self, kind: str, name: str, op: str, n: int = 1) -> None:
        d = self.edges[kind]
        key = (name, op)
        d[key] = d.get(key, 0) + n

    def total(self, kind: str) -> int:
        return sum(self.edges[kind].values())

    def resources(self, kind: str) -> dict[str, dict[str, int]]:
        """Leaves of one kind: name -> {op: count}."""
        out: dict[str, dict[str, int]] = {}
        for (name, op), n in self.edges[kind].items():
            out.setdefault(name, {})[op] = n
        return out

    def shares(self, kind: str) -> dict[Edge, float]:
        """Each edge's share of the kind's accesses (the ``p`` of the similarity)."""
        d = self.edges[kind]
        tot = sum(d.values())
        return {k: v / tot for k, v in d.items()} if tot else {}

    def to_dict(self, limit: int = 0) -> dict[str, Any]:
        """JSON-ready form; ``limit`` > 0 keeps only the heaviest edges of each kind."""
        res: dict[str, Any] = {}
        for kind in KINDS:
            items = sorted(self.edges[kind].items(), key=lambda kv: (-kv[1], kv[0]))
            if limit > 0:
                items = items[:limit]
            res[kind] = [{"name": n, "op": op, "count": c} for (n, op), c in items]
        return {
            "run": self.run_id,
            "task": self.task,
            "agent_id": self.agent_id,
            "events": self.events,
            "totals": {k: self.total(k) for k in KINDS},
            "leaves": {k: len(self.resources(k)) for k in KINDS},
            "resources": res,
            "noise": dict(sorted(self.noise.items())),
            "failed": self.failed,
            "other": dict(sorted(self.other.items())),
            "places": dict(sorted(self.places.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        p = cls(run_id=data.get("run", ""), task=data.get("task"), agent_id=data.get("agent_id"))
        for kind in KINDS:
            for item in data.get("resources", {}).get(kind, []):
                p.add(kind, item["name"], item["op"], int(item["count"]))
        p.noise = dict(data.get("noise", {}))
        p.other = dict(data.get("other", {}))
        p.failed = int(data.get("failed", 0))
        p.events = int(data.get("events", 0))
        p.places = dict(data.get("places", {}))
        return p

    def to_dot(self, limit: int = 0) -> str:
        """The star graph in Graphviz DOT: the run in the middle, one node per leaf."""
        colors = {"command": "#1f77b4", "file": "#2ca02c", "host": "#d62728"}
        shapes = {"command": "box", "file": "note", "host": "ellipse"}
        title = f"run {self.run_id}" + (f"\\ntask {_dot_escape(self.task)}" if self.task else "")
        lines = [
            "digraph profile {",
            "  graph [rankdir=LR, overlap=false];",
            '  node [fontname="Helvetica", fontsize=10];',
            f'  run [shape=doublecircle, label="{_dot_escape(title)}"];',
        ]
        node_ids: dict[tuple[str, str], str] = {}
        for kind in KINDS:
            items = sorted(self.edges[kind].items(), key=lambda kv: (-kv[1], kv[0]))
            if limit > 0:
                items = items[:limit]
            for (name, op), n in items:
                nid = node_ids.get((kind, name))
                if nid is None:
                    nid = node_ids[(kind, name)] = f"{kind[0]}{len(node_ids)}"
                    attrs = f'shape={shapes[kind]}, color="{colors[kind]}", label="{_dot_escape(name)}"'
                    lines.append(f"  {nid} [{attrs}];")
                width = 1 + min(n, 1000) ** 0.5 / 8
                lines.append(f'  run -> {nid} [label="{op} ×{n}", penwidth={width:.2f}];')
        lines.append("}")
        return "\n".join(lines) + "\n"


def _dot_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


class ProfileBuilder:
    """Feeds events one by one into a :class:`Profile` (usable as a pipeline sink)."""

    name = "profile"

    def __init__(self, normalizer: Normalizer | None = None, profile: Profile | None = None) -> None:
        self.norm = normalizer or Normalizer()
        self.profile = profile or Profile()
        self._files = self.profile.edges["file"]
        for prefix, label in self.norm.places.prefixes(self.norm.rules.temp_dirs):
            if label != "<TMP>":  # several directories share it; the rules list them
                self.profile.places.setdefault(label, prefix)
        self._actions = dict(self.norm.rules.noise)

    def event(self, ev: Event) -> None:
        prof = self.profile
        prof.events += 1
        norm = self.norm
        t = ev.type
        if t == "process.start" or t == "process.exec":
            # every process shows up here before it can name a file after its pid
            norm.note_pid(ev.pid)
            norm.note_pid(ev.ppid)
        suffix = ""
        if not ev.ok:
            if not norm.rules.include_failed:
                if t in FILE_OPS or t in HOST_OPS or t in ("process.exec", "net.dns", "proxy.request"):
                    prof.failed += 1
                else:
                    prof.other[t] = prof.other.get(t, 0) + 1
                return
            suffix = "!"
        op = FILE_OPS.get(t)
        if op is not None:
            if op == "read" and ev.flags and "O_DIRECTORY" in ev.flags:
                op = "list"
            if ev.path:
                self._file(ev.path, op, suffix)
            top = TARGET_OPS.get(t)
            if top is not None and ev.target:
                self._file(ev.target, top, suffix)
            return
        if t == "process.exec":
            prof.add("command", norm.command(ev.exe, ev.argv), "exec" + suffix)
            if ev.exe:
                self._file(ev.exe, "exec", suffix)
            return
        hop = HOST_OPS.get(t)
        if hop is not None:
            name = norm.host(ev.address, ev.port, ev.domain, ev.transport)
            if name is not None:
                prof.add("host", name, hop + suffix)
            return
        if t == "net.dns":
            if ev.dns_name:
                prof.add("host", ev.dns_name.rstrip(".").lower(), "dns" + suffix)
            return
        if t == "proxy.request":
            name = norm.host(ev.address, ev.port, ev.domain, ev.transport)
            if name is not None:
                denied = "-deny" if ev.decision == "deny" else ""
                prof.add("host", name, "proxy" + denied + suffix)
            return
        prof.other[t] = prof.other.get(t, 0) + 1

    def _file(self, path: str, op: str, suffix: str) -> None:
        norm = self.norm
        cls = norm.noise_class(path, op)
        if cls is None:
            name = norm.path(path)
        else:
            action = self._actions.get(cls, "drop")
            if action == "drop":
                noise = self.profile.noise
                noise[cls] = noise.get(cls, 0) + 1
                return
            name = f"<noise:{cls}>" if action == "fold" else norm.path(path)
        key = (name, op + suffix if suffix else op)
        files = self._files
        files[key] = files.get(key, 0) + 1

    def feed(self, events: Iterable[Event]) -> Profile:
        ev_hook = self.event
        for ev in events:
            ev_hook(ev)
        return self.profile


def profile_events(
    events: Iterable[Event],
    places: RunPlaces | None = None,
    rules: NormalizeRules | None = None,
    *,
    run_id: str = "",
    task: str | None = None,
    agent_id: str | None = None,
) -> Profile:
    """Profile an event stream in one pass (bounded memory)."""
    builder = ProfileBuilder(Normalizer(places, rules), Profile(run_id=run_id, task=task, agent_id=agent_id))
    return builder.feed(events)


def places_for(
    meta: RunMeta,
    store_root: str | Path | None = None,
    *,
    home: str | None = None,
    skills: Sequence[str] = (),
) -> RunPlaces:
    """The placeholders of a stored run: its workspace, working directory, home, store, skills.

    The home directory is ``meta.extra["home"]`` when the run recorded it, else ``home``.
    """
    extra_home = meta.extra.get("home") if isinstance(meta.extra, dict) else None
    store = str(Path(store_root).resolve()) if store_root is not None else None
    all_skills = list(dict.fromkeys([*meta.skills, *(str(Path(s).resolve()) for s in skills)]))
    return RunPlaces(
        workspace=tuple(meta.workspace or ([meta.cwd] if meta.cwd else [])),
        cwd=meta.cwd or None,
        home=str(extra_home) if extra_home else home,
        store=store,
        skills=tuple(all_skills),
    )


def profile_run(
    run: RunReader,
    rules: NormalizeRules | None = None,
    *,
    skills: Sequence[str] = (),
    home: str | None = None,
) -> Profile:
    """Profile a stored run, streaming its events from the store."""
    rules = rules or NormalizeRules()
    places = places_for(run.meta, run.store.root, home=home, skills=skills)
    return profile_events(
        run.events(), places, rules, run_id=run.id, task=run.meta.task, agent_id=run.meta.agent_id
    )


def format_profile_text(p: Profile, top: int = 15) -> str:
    """A short human summary: totals per kind and the heaviest edges."""
    out = [f"run {p.run_id}" + (f"  task {p.task}" if p.task else "") + f"  {p.events} events"]
    if p.places:
        out.append("places: " + "  ".join(f"{k} = {v}" for k, v in sorted(p.places.items())))
    for kind in KINDS:
        leaves = p.resources(kind)
        out.append(f"\n{kind}s: {len(leaves)} leaves, {p.total(kind)} accesses")
        items = sorted(p.edges[kind].items(), key=lambda kv: (-kv[1], kv[0]))
        for (name, op), n in items[:top]:
            out.append(f"  {n:>6}  {op:<9} {name}")
        if len(items) > top:
            out.append(f"  … {len(items) - top} more edges")
    if p.noise:
        out.append("\nnoise left out: " + ", ".join(f"{k} {v}" for k, v in sorted(p.noise.items())))
    if p.failed:
        out.append(f"failed accesses left out: {p.failed}")
    return "\n".join(out)


def dumps(p: Profile) -> str:
    return json.dumps(p.to_dict(), ensure_ascii=False)
