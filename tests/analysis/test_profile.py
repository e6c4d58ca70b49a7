"""Profiles: which events become which edges, noise, failed accesses, output forms."""

from __future__ import annotations

import tracemalloc

from spyglass.analysis import NormalizeRules, Profile, RunPlaces, profile_events
from spyglass.events import Event

WS = "/work/ws1"
PLACES = RunPlaces(workspace=[WS], cwd=WS, home="/home/u")


def run_events() -> list[Event]:
    return [
        Event(type="process.start", pid=500, ppid=1),
        Event(type="process.exec", pid=500, exe="/usr/bin/python3.11", argv=["python3", f"{WS}/agent.py"]),
        Event(type="file.read", pid=500, path="/etc/ld.so.cache", flags="O_RDONLY|O_CLOEXEC"),
        Event(type="file.read", pid=500, path="/usr/lib/x86_64-linux-gnu/libm.so.6"),
        Event(type="file.read", pid=500, path="/usr/lib/python3.11/os.py"),
        Event(type="file.read", pid=500, path=f"{WS}/agent.py"),
        Event(type="file.read", pid=500, path=WS, flags="O_RDONLY|O_DIRECTORY|O_CLOEXEC"),
        Event(type="file.read", pid=500, path=f"{WS}/data.csv"),
        Event(type="file.read", pid=500, path=f"{WS}/data.csv"),
        Event(type="file.read", pid=500, path=f"{WS}/missing", ok=False, errno="ENOENT"),
        Event(type="file.create", pid=500, path=f"{WS}/out.tmp"),
        Event(type="file.write", pid=500, path=f"{WS}/out.tmp"),
        Event(type="file.rename", pid=500, path=f"{WS}/out.tmp", target=f"{WS}/out.json"),
        Event(type="file.create", pid=500, path=f"{WS}/__pycache__/x.cpython-311.pyc"),
        Event(type="file.mkdir", pid=500, path="/tmp/tmpk3j_9x2a"),
        Event(type="file.delete", pid=500, path="/tmp/tmpk3j_9x2a/scratch"),
        Event(type="process.start", pid=501, ppid=500),
        Event(type="process.exec", pid=501, exe="/usr/bin/git", argv=["git", "status"], cwd=WS),
        Event(type="process.exec", pid=502, exe="/usr/local/bin/git", argv=["git"], ok=False, errno="ENOENT"),
        Event(type="net.dns", pid=500, dns_name="Example.COM."),
        Event(type="net.connect", pid=500, address="93.184.216.34", port=443, domain="example.com",
              transport="tcp"),
        Event(type="net.connect", pid=500, address="127.0.0.1", port=8000, transport="tcp"),
        Event(type="net.connect", pid=500, address="/run/dbus/socket", transport="unix"),
        Event(type="priv.change", pid=500, uid=0),
        Event(type="process.exit", pid=501, exit_code=0),
    ]


def test_event_types_become_edges() -> None:
    p = profile_events(run_events(), PLACES, run_id="r1", task="t")
    assert p.edges["command"] == {
        ("/usr/bin/python3.11 <WS>/agent.py", "exec"): 1,
        ("/usr/bin/git status", "exec"): 1,
    }
    assert p.edges["file"] == {
        ("/usr/bin/python3.11", "exec"): 1,
        ("/usr/bin/git", "exec"): 1,
        ("<WS>/agent.py", "read"): 1,
        ("<WS>", "list"): 1,
        ("<WS>/data.csv", "read"): 2,
        ("<WS>/out.tmp", "create"): 1,
        ("<WS>/out.tmp", "write"): 1,
        ("<WS>/out.tmp", "rename"): 1,
        ("<WS>/out.json", "rename-to"): 1,
        ("<TMP>/tmp<rand>", "mkdir"): 1,
        ("<TMP>/tmp<rand>/scratch", "delete"): 1,
    }
    assert p.edges["host"] == {
        ("example.com", "dns"): 1,
        ("example.com:443", "connect"): 1,
        ("127.0.0.1:8000", "connect"): 1,
        ("unix:/run/dbus/socket", "connect"): 1,
    }
    assert p.noise == {"loader": 2, "runtime": 1, "pycache": 1}
    assert p.failed == 2
    assert p.other == {"process.start": 2, "priv.change": 1, "process.exit": 1}
    assert p.events == len(run_events())
    assert p.resources("file")["<WS>/out.tmp"] == {"create": 1, "write": 1, "rename": 1}


def test_failed_accesses_can_be_kept() -> None:
    p = profile_events(run_events(), PLACES, NormalizeRules(include_failed=True))
    assert p.edges["file"][("<WS>/missing", "read!")] == 1
    assert p.edges["command"][("/usr/local/bin/git", "exec!")] == 1
    assert p.failed == 0


def test_noise_can_be_folded_or_kept() -> None:
    folded = profile_events(run_events(), PLACES, NormalizeRules(noise=dict.fromkeys(
        ("ignored", "pycache", "loader", "locale", "runtime"), "fold")))
    assert folded.edges["file"][("<noise:loader>", "read")] == 2
    assert folded.edges["file"][("<noise:pycache>", "create")] == 1
    assert folded.noise == {}
    kept = profile_events(run_events(), PLACES, NormalizeRules(noise={"loader": "keep"}))
    assert kept.edges["file"][("/etc/ld.so.cache", "read")] == 1
    assert kept.noise == {"runtime": 1, "pycache": 1}


def test_dict_round_trip_and_limit() -> None:
    p = profile_events(run_events(), PLACES, run_id="r1", task="t", agent_id="a")
    d = p.to_dict()
    assert d["totals"] == {"command": 2, "file": 12, "host": 4}
    assert d["leaves"]["file"] == 9
    assert d["resources"]["file"][0] == {"name": "<WS>/data.csv", "op": "read", "count": 2}
    back = Profile.from_dict(d)
    assert back.edges == p.edges and back.noise == p.noise and back.task == "t"
    assert len(p.to_dict(limit=1)["resources"]["file"]) == 1


def test_dot_is_a_star() -> None:
    dot = profile_events(run_events(), PLACES, run_id="r1").to_dot()
    assert dot.startswith("digraph profile {")
    assert 'run [shape=doublecircle, label="run r1"]' in dot
    edges = [line for line in dot.splitlines() if "->" in line]
    assert len(edges) == 2 + 11 + 4
    assert all(line.strip().startswith("run -> ") for line in edges)
    assert 'label="read ×2"' in dot
    # a file with three ops is one node with three edges
    node = next(line.split()[0] for line in dot.splitlines() if 'label="<WS>/out.tmp"' in line)
    assert sum(1 for line in edges if f"-> {node} " in line) == 3


def test_memory_does_not_grow_with_events() -> None:
    """A profile keeps counters per distinct resource, not the events."""

    def peak(n: int) -> int:
        tracemalloc.start()
        try:
            events = (
                Event(type="file.read", pid=700 + i % 5, path=f"{WS}/src/f{i % 50}.py") for i in range(n)
            )
            p = profile_events(events, PLACES)
            assert p.events == n
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, big = peak(2_000), peak(40_000)
    assert big < small * 1.5 + 50_000


def test_builder_is_a_pipeline_sink() -> None:
    from spyglass.analysis import Normalizer, ProfileBuilder
    from spyglass.pipeline import Pipeline

    builder = ProfileBuilder(Normalizer(PLACES))
    pipe = Pipeline([builder])
    pipe.start()
    for ev in run_events():
        pipe.feed(ev)
    pipe.done()
    assert pipe.errors == {}
    assert builder.profile.edges["file"][("<WS>/data.csv", "read")] == 2
    assert builder.profile.places == {"<WS>": WS, "<HOME>": "/home/u"}
