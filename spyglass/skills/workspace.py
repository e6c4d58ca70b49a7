"""One sandboxed workspace for one exercise of a skill: the skill, sample inputs, the audit hook, the steps.

Layout (``base`` is a fresh directory per run, so runs never see each other's leftovers)::

    base/home/                       HOME (the sandbox mounts the decoy home here)
    base/ws/                         the workspace: the agent's working directory
    base/ws/<inputs>                 sample inputs (or a copy of the author's --inputs)
    base/ws/.agents/skills/NAME/     the skill (read-only inside the sandbox)
    base/ws/.spyglass-audit/         the Python audit hook, its logs, the steps, their exit codes

Two ways to exercise a skill:

* ``direct``: each script of the skill, run with the sample inputs (the command
  line SKILL.md gives for it, else the interpreter and the first input);
* ``agent``: a compliant agent, i.e. a deterministic program that runs every
  shell and Python code block of SKILL.md in order, as an agent that follows the
  file literally would (the blocks inside HTML comments too: an agent reads them).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Final

import msgspec

from spyglass.skills import audit
from spyglass.skills.samples import write_sample
from spyglass.skills.skillmd import SKILL_FILE, parse_skill_md
from spyglass.skills.spec import INPUT_KINDS, Spec, logical_lines

SCRIPT_EXT: Final = {".py": "python3", ".sh": "bash", ".bash": "bash", ".js": "node", ".mjs": "node"}
STEP_TIMEOUT: Final = 60
_PLACEHOLDERS: Final = ("{baseDir}", "${SKILL_DIR}", "$SKILL_DIR", "${CLAUDE_SKILL_DIR}", "{skill_dir}")
_PART_REF: Final = re.compile(r"(?<![\w./$-])((?:scripts|references|assets)/[\w./-]+)")


class Step(msgspec.Struct):
    index: int
    file: Path
    origin: str  # "SKILL.md:12" or "scripts/x.py"
    text: str
    lines: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (origin of the line, its text)


class Workspace(msgspec.Struct):
    base: Path
    root: Path
    skill: Path
    audit_dir: Path
    home: Path
    inputs: list[str]
    steps: list[Step]
    env: dict[str, str]

    @property
    def status_file(self) -> Path:
        return self.audit_dir / "status"

    def step_status(self) -> dict[int, int]:
        out: dict[int, int] = {}
        if self.status_file.exists():
            for line in self.status_file.read_text().splitlines():
                name, _, rc = line.partition(" ")
                if name.endswith(".sh") and rc.strip().lstrip("-").isdigit():
                    out[int(name.split(".")[0])] = int(rc)
        return out

    def driver_argv(self) -> list[str]:
        return ["/bin/sh", str(self.audit_dir / "driver.sh")]


def skill_scripts(skill_dir: Path) -> list[str]:
    """The skill's runnable scripts (relative paths), sorted."""
    out = []
    for p in sorted(skill_dir.rglob("*")):
        rel = p.relative_to(skill_dir)
        if (
            p.is_file()
            and p.suffix in SCRIPT_EXT
            and not any(x.startswith(".") or x == "__pycache__" for x in rel.parts)
        ):
            out.append(str(rel))
    return out


def rewrite(text: str, skill: Path, workspace: Path) -> str:
    """Point a SKILL.md command at the skill's copy: placeholders and ``scripts/...`` references."""
    for ph in _PLACEHOLDERS:
        text = text.replace(ph, str(skill))

    def ref(m: re.Match[str]) -> str:
        rel = m.group(1)
        if (skill / rel).exists() and not (workspace / rel).exists():
            return str(skill / rel)
        return rel

    return _PART_REF.sub(ref, text)


def _inputs(ws: Path, spec: Spec, inputs_dir: Path | None) -> list[str]:
    if inputs_dir is not None:
        shutil.copytree(inputs_dir, ws, dirs_exist_ok=True)
        return sorted(str(p.relative_to(ws)) for p in ws.rglob("*") if p.is_file())
    made: list[str] = []
    writes = spec.values("write")
    for e in spec.read:
        p = e.value
        if p.startswith(("~", "/", "$", "{")) or ".." in p.split("/") or any(fnmatch.fnmatch(p, w) for w in writes):
            continue
        ext = p.rsplit(".", 1)[-1].lower() if "." in p else ""
        if ext in INPUT_KINDS and "*" not in p and write_sample(ws / p, ext):
            made.append(p)
    made_kinds = {m.rsplit(".", 1)[-1] for m in made}
    for e in spec.inputs:
        if e.value not in made_kinds and write_sample(ws / f"sample.{e.value}", e.value):
            made.append(f"sample.{e.value}")
    if not made:
        write_sample(ws / "sample.txt", "txt")
        made.append("sample.txt")
    return made


def _git_repo(ws: Path) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Sample Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Sample Author",
        "GIT_COMMITTER_EMAIL": "author@example.com",
        "GIT_AUTHOR_DATE": "2026-01-05T10:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-05T10:00:00Z",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_SYSTEM": "/dev/null",
    }
    (ws / ".gitignore").write_text(f"{audit.AUDIT_DIR}/\n.agents/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "Sample data"]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True, timeout=60)


def _direct_steps(spec: Spec, skill: Path, ws: Path, inputs: list[str]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    out = []
    for rel in skill_scripts(skill):
        usage = next(
            (
                e
                for e in spec.run
                if rel in e.value or f"/{Path(rel).name}" in e.value or e.value.split()[1:2] == [Path(rel).name]
            ),
            None,
        )
        if usage is not None:
            cmd = rewrite(usage.value, skill, ws)
            out.append((rel, cmd, [(usage.source, cmd)]))
        else:
            cmd = " ".join([SCRIPT_EXT[Path(rel).suffix], shlex.quote(str(skill / rel)), *map(shlex.quote, inputs[:1])])
            out.append((rel, cmd, [(rel, cmd)]))
    return out


def _agent_steps(skill: Path, ws: Path) -> list[tuple[str, str, list[tuple[str, str]]]]:
    doc = parse_skill_md((skill / SKILL_FILE).read_text(encoding="utf-8", errors="replace"))
    out = []
    for block in doc.blocks:
        origin = f"{SKILL_FILE}:{block.line}"
        if block.is_shell:
            text = rewrite(block.text, skill, ws)
            lines = [(f"{SKILL_FILE}:{n}", rewrite(t, skill, ws)) for n, t in logical_lines(block.lines, block.line)]
            out.append((origin, text, lines))
        elif block.lang.lower() in ("python", "py", "python3"):
            text = "python3 - <<'SPYGLASS_PY_BLOCK'\n" + rewrite(block.text, skill, ws) + "\nSPYGLASS_PY_BLOCK"
            out.append((origin, text, [(origin, "python3 -")]))
    return out


def prepare_workspace(base: Path, skill_dir: Path, spec: Spec, mode: str, inputs_dir: Path | None = None) -> Workspace:
    base.mkdir(parents=True, exist_ok=True)
    ws, home = base / "ws", base / "home"
    ws.mkdir()
    home.mkdir()
    skill = ws / ".agents" / "skills" / skill_dir.name
    shutil.copytree(skill_dir, skill, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git"), symlinks=True)
    inputs = _inputs(ws, spec, inputs_dir)
    if "git" in spec.values("commands"):
        _git_repo(ws)
    audit_dir, env = audit.install(ws)
    steps_dir = audit_dir / "steps"
    steps_dir.mkdir()
    raw = _direct_steps(spec, skill, ws, inputs) if mode == "direct" else _agent_steps(skill, ws)
    steps: list[Step] = []
    for i, (origin, text, lines) in enumerate(raw, 1):
        f = steps_dir / f"{i:02d}.sh"
        f.write_text(f"cd {shlex.quote(str(ws))}\n{text}\n")
        steps.append(Step(i, f, origin, text, lines))
    status = audit_dir / "status"
    (audit_dir / "driver.sh").write_text(
        f"cd {shlex.quote(str(ws))} || exit 1\n"
        f"for f in {shlex.quote(str(steps_dir))}/*.sh; do\n"
        f'  [ -e "$f" ] || continue\n'
        f'  timeout {STEP_TIMEOUT} bash "$f" </dev/null >"$f.out" 2>&1\n'
        f'  echo "$(basename "$f") $?" >> {shlex.quote(str(status))}\n'
        "done\n"
    )
    env.update(
        {
            "HOME": str(home),
            "SKILL_DIR": str(skill),
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "USER": "user",
            "TERM": "dumb",
        }
    )
    return Workspace(base, ws, skill, audit_dir, home, inputs, steps, env)
