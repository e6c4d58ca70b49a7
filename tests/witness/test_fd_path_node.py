"""What Claude Code does with its tool output, played by a small node program: a directory opened
as a descriptor, then ``mkdir /proc/self/fd/N/tasks`` and ``ID.output`` created (``O_EXCL``),
written, read and removed through ``/proc/self/fd/M/...`` from libuv's worker threads (node's
asynchronous file calls run there), and the process gone at once.

Under eBPF a path through a descriptor was once recorded unresolved (``/proc/self/fd/11/NAME``)
on a Claude Code run; the program now walks the descriptor when the call is made.  Into the
store it is ``witness-tamper`` under both backends; the benign twin, the same into its
workspace, stays silent and its events carry the real path (the typed one in ``raw_path``)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node not installed")

#: ``node -e WRITER DIR``
WRITER = r"""
const fs = require("fs");
const dir = fs.openSync(process.argv[1], "r");
fs.mkdirSync(`/proc/self/fd/${dir}/tasks`);
const tasks = fs.openSync(`/proc/self/fd/${dir}/tasks`, "r");
const out = `/proc/self/fd/${tasks}/b2m43g1xc.output`;
fs.open(out, "wx", (err, fd) => {
  if (err) throw err;
  fs.write(fd, "x", () => fs.close(fd, () => fs.promises.readFile(out).then(
    () => fs.promises.writeFile(`/proc/thread-self/fd/${tasks}/kept.output`, "y")).then(() => process.exit(0))));
});
"""


def _script(target: str) -> str:
    return f"{NODE} -e '{WRITER}' {target}"


def test_node_writing_into_the_store_through_its_descriptors_is_tamper(setup: Any) -> None:
    setup.play(_script('"$STORE/cache"'))
    msgs = setup.tamper()
    for name in ("/cache/tasks", "tasks/b2m43g1xc.output", "tasks/kept.output"):
        assert any(name in m and "the spyglass store" in m for m in msgs), (name, msgs)


def test_benign_twin_node_writing_into_its_workspace_is_silent_and_named(setup: Any) -> None:
    (setup.ws / "sub").mkdir()
    setup.play(_script('"$PWD/sub"'))
    assert setup.tamper() == []
    assert (setup.ws / "sub" / "tasks" / "kept.output").read_text() == "y"
    res = setup.spyglass("events", "latest", "--store", str(setup.store), "--format", "json", "--type", "file.")
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    real = str((setup.ws / "sub" / "tasks").resolve())
    made = {e["file.path"]: e.get("file.raw_path") for e in events
            if e.get("type") in ("file.create", "file.mkdir") and "tasks" in e.get("file.path", "")}  # fmt: skip
    assert set(made) >= {real, f"{real}/b2m43g1xc.output", f"{real}/kept.output"}, made
    assert all(raw and raw.startswith("/proc/") for raw in made.values()), made
