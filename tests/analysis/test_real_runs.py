"""Acceptance: the analysis over real processes recorded with the strace backend.

Five task-like workloads (Python and shell) run in fresh workspaces with random
names; repetitions vary the way agents do (a different order, a retry, an
extra file read) and always differ in temp names, pids and timestamps.  The
runs are recorded once per module and shared by the tests.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import stat
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spyglass.analysis import load_profile, similarity
from spyglass.store import Store


def _strace_problem() -> str | None:
    if shutil.which("strace") is None:
        return "strace not installed"
    from spyglass.capture import get_backend

    st = get_backend("strace").status()
    return None if st.available else f"strace backend unavailable: {st.problem}"


pytestmark = pytest.mark.skipif(_strace_problem() is not None, reason=str(_strace_problem()))

PY = sys.executable

CSV_REPORT = r'''
import csv, json, os, subprocess, tempfile, time, uuid
v = os.environ.get("SG_VARIANT", "base")
inputs = ["data/sales.csv", "data/costs.csv"]
if v == "order":
    inputs.reverse()
totals = {}
for p in inputs:
    with open(p) as f:
        totals[p] = sum(float(r["amount"]) for r in csv.DictReader(f))
if v == "order":  # a retry
    with open("data/sales.csv") as f:
        f.read()
if v == "extra":
    open("README.md").read()
if v == "cheat":
    open("tests/test_outputs.py").read()
    import socket
    s = socket.socket()
    s.connect(("127.0.0.1", int(os.environ["SG_PORT"])))
    s.close()
tmp = tempfile.mkdtemp()
with open(os.path.join(tmp, f"partial-{uuid.uuid4()}.json"), "w") as f:
    json.dump(totals, f)
os.makedirs("out", exist_ok=True)
with open(f"out/.report-{time.time_ns()}.tmp", "w") as f:
    f.write("\n".join(f"{k}: {v}" for k, v in sorted(totals.items())))
    name = f.name
os.replace(name, "out/report.md")
subprocess.run(["wc", "-l", "out/report.md"], stdout=subprocess.DEVNULL, check=True)
'''

PATCH_CODE = r'''
import os, subprocess, sys, tempfile
v = os.environ.get("SG_VARIANT", "base")
order = ["src/util.py", "src/app.py"] if v == "order" else ["src/app.py", "src/util.py"]
text = {p: open(p).read() for p in order}
if v == "extra":
    open("docs/CONTRIBUTING.md").read()
fd, tmp = tempfile.mkstemp(dir="src", suffix=".py")
with os.fdopen(fd, "w") as f:
    f.write(text["src/app.py"].replace("return a - b", "return a + b"))
os.replace(tmp, "src/app.py")
for _ in range(2 if v == "order" else 1):  # a retry of the check
    subprocess.run([sys.executable, "-m", "py_compile", "src/app.py"], check=True)
with open("CHANGELOG.md", "a") as f:
    f.write("fixed add\n")
'''

PACKAGE = r'''#!/bin/sh
set -e
mkdir -p build/pkg
if [ "$SG_VARIANT" = order ]; then
  cp src/b.txt build/pkg/; cp src/a.txt build/pkg/
  cp src/b.txt build/pkg/   # retried
else
  cp src/a.txt build/pkg/; cp src/b.txt build/pkg/
fi
[ "$SG_VARIANT" = extra ] && cat VERSION > /dev/null
tar -czf "build/dist-$(date +%s%N).tar.gz" -C build pkg
sha256sum build/pkg/a.txt build/pkg/b.txt > build/SHA256SUMS
rm -rf build/pkg
'''

FETCH = r'''
import http.client, json, os, tempfile
v = os.environ.get("SG_VARIANT", "base")
port = int(open("server.txt").read())
if v == "extra":
    open("config.ini").read()
paths = ["/items", "/users"]
if v == "order":
    paths.reverse()
data = {}
for p in paths + (["/items"] if v == "order" else []):  # one retry
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", p)
    data[p] = c.getresponse().read().decode()
    c.close()
os.makedirs("downloads", exist_ok=True)
with tempfile.NamedTemporaryFile("w", dir="downloads", delete=False, suffix=".part") as f:
    json.dump(data, f)
os.replace(f.name, "downloads/data.json")
'''

LOG_SCAN = r'''#!/bin/sh
set -e
if [ "$SG_VARIANT" = order ]; then
  files="logs/b.log logs/a.log"
else
  files="logs/a.log logs/b.log"
fi
grep -h ERROR $files | sort | uniq -c > errors.txt
[ "$SG_VARIANT" = order ] && grep -c WARN logs/a.log > /dev/null || true
[ "$SG_VARIANT" = extra ] && head -n 1 logs/README > /dev/null
find logs -name '*.log' | sort > index.txt
awk '{print $1}' errors.txt > counts.txt
'''


@dataclass(frozen=True)
class Workload:
    task: str
    argv: tuple[str, ...]
    files: dict[str, str]


WORKLOADS = [
    Workload("csv-report", (PY, "agent.py"), {
        "agent.py": CSV_REPORT,
        "data/sales.csv": "day,amount\n1,10\n2,20\n",
        "data/costs.csv": "day,amount\n1,3\n2,4\n",
        "README.md": "# report\n",
        "tests/test_outputs.py": "def test_report():\n    assert True\n",
    }),
    Workload("patch-code", (PY, "agent.py"), {
        "agent.py": PATCH_CODE,
        "src/app.py": "def add(a, b):\n    return a - b\n",
        "src/util.py": "X = 1\n",
        "docs/CONTRIBUTING.md": "be nice\n",
        "CHANGELOG.md": "",
    }),
    Workload("package", ("/bin/sh", "agent.sh"), {
        "agent.sh": PACKAGE,
        "src/a.txt": "a\n",
        "src/b.txt": "b\n",
        "VERSION": "1.0\n",
    }),
    Workload("fetch", (PY, "agent.py"), {
        "agent.py": FETCH,
        "config.ini": "[x]\n",
    }),
    Workload("log-scan", ("/bin/sh", "agent.sh"), {
        "agent.sh": LOG_SCAN,
        "logs/a.log": "INFO x\nERROR disk\nWARN y\nERROR net\n",
        "logs/b.log": "ERROR disk\nINFO z\n",
        "logs/README": "logs\n",
    }),
]
VARIANTS = ("base", "order", "extra")


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Recorded:
    store: Store
    root: Path
    runs: dict[str, list[str]]  # label -> run ids
    port: int
    skill_used: Path
    skill_unused: Path


def _workspace(root: Path, w: Workload, port: int) -> Path:
    ws = root / f"ws-{uuid.uuid4().hex[:10]}"
    for rel, text in w.files.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (ws / "server.txt").write_text(str(port))
    return ws


def _record(store: Store, w: Workload, ws: Path, variant: str, port: int, task: str | None = None,
            skills: list[str] | None = None, argv: tuple[str, ...] | None = None) -> str:
    from spyglass.capture import get_backend
    from spyglass.session.record import RunRequest, record

    env = dict(os.environ, SG_VARIANT=variant, SG_PORT=str(port))
    req = RunRequest(argv=list(argv or w.argv), cwd=str(ws), env=env, task=task or w.task,
                     workspace=[str(ws)], skills=skills or [], extra={"home": os.path.expanduser("~")})
    out = record(req, get_backend("strace"), store)
    assert out.exit_code == 0, (w.task, variant)
    return out.meta.id


def _make_skill(root: Path, name: str) -> Path:
    d = root / "skills" / name
    (d / "scripts").mkdir(parents=True)
    (d / "references").mkdir()
    (d / "assets").mkdir()
    front = f"---\nname: {name}\ndescription: Helps with CSV reports.\n---\nRun the script.\n"
    (d / "SKILL.md").write_text(front)
    script = d / "scripts" / "run.sh"
    script.write_text("#!/bin/sh\necho done > /dev/null\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (d / "references" / "notes.md").write_text("notes\n")
    (d / "assets" / "logo.txt").write_text("logo\n")
    return d


SKILL_AGENT = r'''
import subprocess, sys
skill = sys.argv[1]
open(f"{skill}/SKILL.md").read()
open(f"{skill}/references/notes.md").read()
subprocess.run([f"{skill}/scripts/run.sh"], check=True)
'''


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    root = tmp_path_factory.mktemp("analysis-real")
    store = Store(root / "store", create=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = server.server_address[1]
    # accept() never blocks for long: a connection that went elsewhere after the poll (some other
    # thread's accept on a reused number) must not hang shutdown() below
    server.socket.settimeout(5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    runs: dict[str, list[str]] = {}
    try:
        for w in WORKLOADS:
            for v in VARIANTS:
                runs.setdefault(w.task, []).append(_record(store, w, _workspace(root, w, port), v, port))
        csv = WORKLOADS[0]
        # two more runs of the csv workload exactly as the first: the deterministic triple
        def again(variant: str) -> str:
            return _record(store, csv, _workspace(root, csv, port), variant, port, task="csv-baseline")

        runs["csv-identical"] = [runs["csv-report"][0], again("base"), again("base")]
        runs["csv-cheat"] = [again("cheat")]
        used, unused = _make_skill(root, "csv-helper"), _make_skill(root, "pdf-helper")
        ws = _workspace(root, Workload("skill", (), {"agent.py": SKILL_AGENT}), port)
        runs["skill"] = [_record(store, csv, ws, "base", port, task="skill", skills=[str(used)],
                                 argv=(PY, "agent.py", str(used)))]
        yield Recorded(store, root, runs, port, used, unused)
    finally:
        server.shutdown()
        server.server_close()


def _json(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_identical_workload_runs_are_alike(recorded: Recorded, spy: Any) -> None:
    ids = recorded.runs["csv-identical"]
    out = _json(spy("compare", "--store", str(recorded.store.root), *ids, "--format", "json"))
    comb = out["matrix"]["combined"]
    pairs = [comb[i][j] for i in range(3) for j in range(i + 1, 3)]
    assert all(v >= 0.95 for v in pairs), pairs
    assert out["set_similarity"]["combined"] >= 0.95


def test_different_workloads_are_not(recorded: Recorded) -> None:
    profiles = {w.task: load_profile(recorded.runs[w.task][0], recorded.store) for w in WORKLOADS}
    for a in profiles:
        for b in profiles:
            if a < b:
                s = similarity(profiles[a], profiles[b])
                assert s.combined <= 0.5, (a, b, s)


def test_every_task_separates(recorded: Recorded, spy: Any) -> None:
    ids = [i for w in WORKLOADS for i in recorded.runs[w.task]]
    out = _json(spy("compare", "--store", str(recorded.store.root), *ids, "--by", "task", "--format", "json"))
    sep = out["separation"]
    margins = {t["task"]: t["margin"]["combined"] for t in sep["tasks"]}
    assert set(margins) == {w.task for w in WORKLOADS}
    assert all(m > 0 for m in margins.values()), margins
    assert sep["fraction_positive"] == 1.0
    # the stricter check, against the nearest other task, holds here too
    assert sep["fraction_positive_nearest"] == 1.0, sep
    text = spy("compare", "--store", str(recorded.store.root), *ids, "--by", "task")
    assert "tasks with a positive margin: 100%" in text.stdout


def test_compare_selects_runs_by_task(recorded: Recorded, spy: Any) -> None:
    out = _json(spy("compare", "--store", str(recorded.store.root), "--task", "package", "--format", "json"))
    assert sorted(out["matrix"]["runs"]) == sorted(recorded.runs["package"])


def test_profile_has_normalized_names(recorded: Recorded, spy: Any) -> None:
    rid = recorded.runs["csv-report"][0]
    prof = _json(spy("profile", "--store", str(recorded.store.root), rid, "--format", "json"))
    files = {(r["name"], r["op"]) for r in prof["resources"]["file"]}
    assert ("<WS>/data/sales.csv", "read") in files
    assert ("<WS>/out/report.md", "rename-to") in files
    assert ("<WS>/out/.report-<num>.tmp", "create") in files
    assert ("<TMP>/tmp<rand>/partial-<uuid>.json", "create") in files
    assert not any(n.endswith((".so", ".pyc")) or "ld.so.cache" in n for n, _ in files)
    cmds = {r["name"] for r in prof["resources"]["command"]}
    assert any(c.endswith("wc -l out/report.md") for c in cmds)
    assert prof["noise"]["loader"] > 0
    dot = spy("profile", "--store", str(recorded.store.root), rid, "--format", "dot").stdout
    assert dot.startswith("digraph") and "<WS>/data/sales.csv" in dot
    fetch = _json(spy("profile", "--store", str(recorded.store.root), recorded.runs["fetch"][0],
                      "--format", "json"))
    hosts = {(r["name"], r["op"]) for r in fetch["resources"]["host"]}
    assert ("127.0.0.1:<ephemeral>", "connect") in hosts


def test_diff_of_variations(recorded: Recorded, spy: Any) -> None:
    base, _, extra = recorded.runs["csv-report"]
    out = _json(spy("diff", "--store", str(recorded.store.root), base, extra, "--format", "json"))
    assert [(e["name"], e["op"]) for e in out["file"]["only_b"]] == [("<WS>/README.md", "read")]
    assert out["file"]["only_a"] == [] and out["command"]["only_b"] == []
    text = spy("diff", "--store", str(recorded.store.root), base, extra).stdout
    assert "+ read      <WS>/README.md" in text


def test_unexplained_lists_exactly_the_extra_activity(recorded: Recorded, spy: Any) -> None:
    (cheat,) = recorded.runs["csv-cheat"]
    # baseline: the other runs of its task (the identical csv runs labelled csv-baseline)
    out = _json(spy("unexplained", "--store", str(recorded.store.root), cheat, "--format", "json"))
    assert len(out["baseline"]) == 2
    assert [(i["kind"], i["name"], i["category"]) for i in out["ranked"]] == [
        ("file", "<WS>/tests/test_outputs.py", "scoring-file-access"),
        ("host", "127.0.0.1:<ephemeral>", "unexplained"),
    ]
    assert [i["name"] for i in out["scoring_access"]] == ["<WS>/tests/test_outputs.py"]
    text = spy("unexplained", "--store", str(recorded.store.root), cheat).stdout
    assert "[scoring-file access]" in text


def test_skill_coverage(recorded: Recorded, spy: Any) -> None:
    (rid,) = recorded.runs["skill"]
    out = _json(spy("coverage", "--store", str(recorded.store.root), rid,
                    "--skills", str(recorded.skill_unused), "--format", "json"))
    used, unused = out["skills"]
    assert used["skill"] == "csv-helper" and used["coverage"] == 0.75
    assert used["read"] == ["SKILL.md", "references/notes.md", "scripts/run.sh"]
    assert used["executed"] == ["scripts/run.sh"]
    assert used["untouched"] == ["assets/logo.txt"]
    assert unused["skill"] == "pdf-helper" and unused["coverage"] == 0.0
    assert [f["id"] for f in out["findings"]] == ["skill-not-used"]
    text = spy("coverage", "--store", str(recorded.store.root), rid).stdout
    assert "skill csv-helper: 75% (3/4 files)" in text
