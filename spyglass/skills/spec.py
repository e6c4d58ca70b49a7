"""The skill's declared behaviour: a spec derived from SKILL.md, that a person can read and edit.

Sources, in this order (each entry keeps where it came from, ``SKILL.md:LINE``):

* the front matter: ``name``, ``allowed-tools``, ``metadata``;
* an optional ``capabilities:`` block (in the front matter or under ``metadata``):
  ``network`` (hosts), ``read``/``write``/``delete`` (path globs), ``commands``,
  ``secrets`` (``none`` or the secret paths it needs), ``sequences`` (sentences
  such as "writes only under the output directory");
* what the body states: hosts of the URLs it names, the commands and paths of its
  shell code blocks, the kinds of input files it mentions.

Text inside HTML comments declares nothing (an agent reads it, a person does not
see it). The derivation is deterministic and needs no model.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path
from typing import Any, Final

import msgspec
import yaml

from spyglass.errors import UsageError
from spyglass.skills.skillmd import SKILL_FILE, SkillDoc, parse_skill_md

SPEC_VERSION: Final = 1
_URL = re.compile(r"\bhttps?://([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::(\d+))?")
INPUT_KINDS: Final = ("csv", "tsv", "json", "jsonl", "txt", "md", "yaml", "yml", "xml", "html", "xlsx", "docx", "pdf")
_KIND_WORDS: Final = {"csv": "csv", "json": "json", "markdown": "md", "yaml": "yaml", "text file": "txt"}
_OUT_FLAGS: Final = frozenset({"-o", "--out", "--output", "--output-dir", "--outdir", "--dest"})
_LIST_KEYS: Final = ("hosts", "read", "write", "delete", "commands", "secrets", "sequences", "inputs", "run")
_ITEM_KEY: Final = {
    "hosts": "host",
    "read": "path",
    "write": "path",
    "delete": "path",
    "commands": "command",
    "secrets": "path",
    "sequences": "text",
    "inputs": "kind",
    "run": "command",
}


class Entry(msgspec.Struct):
    value: str
    source: str  # "SKILL.md:12", "capabilities (SKILL.md:5)", "spec"

    def to_dict(self, key: str) -> dict[str, str]:
        return {key: self.value, "from": self.source}


class Spec(msgspec.Struct):
    skill: str
    allowed_tools: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    hosts: list[Entry] = msgspec.field(default_factory=list)
    read: list[Entry] = msgspec.field(default_factory=list)
    write: list[Entry] = msgspec.field(default_factory=list)
    delete: list[Entry] = msgspec.field(default_factory=list)
    commands: list[Entry] = msgspec.field(default_factory=list)
    secrets: list[Entry] = msgspec.field(default_factory=list)  # empty: "secrets: none"
    sequences: list[Entry] = msgspec.field(default_factory=list)
    inputs: list[Entry] = msgspec.field(default_factory=list)
    run: list[Entry] = msgspec.field(default_factory=list)  # command lines that exercise the skill
    #: declared explicitly in ``capabilities`` (not only derived): the judge is strict about them
    declared: list[str] = msgspec.field(default_factory=list)

    def values(self, key: str) -> list[str]:
        entries: list[Entry] = getattr(self, key)
        return [e.value for e in entries]

    def states(self, phrase: str) -> bool:
        return any(phrase in e.value.lower() for e in self.sequences)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": SPEC_VERSION, "skill": self.skill, "allowed_tools": self.allowed_tools}
        if self.metadata:
            out["metadata"] = self.metadata
        for key in _LIST_KEYS:
            entries: list[Entry] = getattr(self, key)
            if key == "secrets" and not entries:
                out[key] = "none"
                continue
            out[key] = [e.to_dict(_ITEM_KEY[key]) for e in entries]
        out["declared"] = list(self.declared)
        return out

    def to_yaml(self) -> str:
        head = (
            "# spyglass skill spec: what the skill declares it does.\n"
            "# Edit freely; `from` says where a derived entry came from. Check a run against it with\n"
            "#   spyglass skill verify SKILL_DIR --spec THIS_FILE\n"
        )
        return head + yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=110)


def _entries(key: str, raw: Any, where: str) -> list[Entry]:
    if raw is None or raw == "none":
        return []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        raise UsageError(f"{where}: `{key}` must be a list")
    out = []
    for item in raw:
        if isinstance(item, dict):
            value = item.get(_ITEM_KEY[key], item.get("value"))
            if not isinstance(value, str):
                raise UsageError(f"{where}: an entry of `{key}` needs `{_ITEM_KEY[key]}:`")
            out.append(Entry(value, str(item.get("from", "spec"))))
        else:
            out.append(Entry(str(item), "spec"))
    return out


def load_spec(path: Path) -> Spec:
    """Read a spec file written by ``skill spec`` (and perhaps edited); errors name file:line:col."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the spec: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        raise UsageError(f"{path}:{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or "skill" not in data:
        raise UsageError(f"{path}:1:1: not a skill spec (a mapping with `skill:`)")
    unknown = set(data) - {*_LIST_KEYS, "version", "skill", "allowed_tools", "metadata", "declared"}
    if unknown:
        raise UsageError(f"{path}:1:1: unknown key(s) {', '.join(sorted(unknown))}")
    spec = Spec(skill=str(data["skill"]), allowed_tools=[str(t) for t in data.get("allowed_tools") or []])
    spec.metadata = dict(data.get("metadata") or {})
    for key in _LIST_KEYS:
        setattr(spec, key, _entries(key, data.get(key), str(path)))
    spec.declared = [str(d) for d in data.get("declared") or []]
    return spec


def _tools(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [t for t in re.split(r"[,\s]+", raw) if t]
    return [str(t) for t in raw] if isinstance(raw, list) else [str(raw)]


def logical_lines(lines: list[str], first: int) -> list[tuple[int, str]]:
    """Shell lines with backslash continuations joined; comments and prompts dropped."""
    out: list[tuple[int, str]] = []
    buf, start = "", first
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        if not buf:
            start = first + i
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            line = re.sub(r"^\s*\$\s+", "", line)
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        out.append((start, (buf + line).strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


def command_words(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split at pipes and separators), as words."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = line.split()
    cmds: list[list[str]] = [[]]
    for tok in tokens:
        if tok and set(tok) <= set(";&|()"):
            cmds.append([])
        else:
            cmds[-1].append(tok)
    return [c for c in cmds if c]


def program_of(words: list[str]) -> str | None:
    for w in words:
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) or w in ("sudo", "env", "exec", "time", "nohup"):
            continue
        return w.rsplit("/", 1)[-1] if not w.startswith(("$", "{")) else w
    return None


def _path_like(tok: str) -> bool:
    if tok.startswith("-") or "://" in tok or (tok.startswith("$") and "/" not in tok):
        return False
    ext = tok.rsplit(".", 1)[-1].lower() if "." in tok else ""
    return "/" in tok or ext in INPUT_KINDS


def _scope(tok: str) -> str:
    tok = tok.rstrip("/") if tok.endswith("/") else tok
    if "." not in tok.rsplit("/", 1)[-1]:
        return f"{tok}/**"
    return tok


def _from_block_line(spec: Spec, line: str, src: str, skill_files: set[str]) -> None:
    spec.run.append(Entry(line, src))
    for words in command_words(line):
        prog = program_of(words)
        if prog and prog not in spec.values("commands"):
            spec.commands.append(Entry(prog, src))
        prev = ""
        for tok in words[1:]:
            if prev in (">", ">>") or prev in _OUT_FLAGS:
                if tok not in spec.values("write"):
                    spec.write.append(Entry(_scope(tok), src))
            elif (
                _path_like(tok)
                and tok not in skill_files
                and not tok.startswith(("scripts/", "{baseDir}", "$"))
                and tok not in spec.values("read")
            ):
                spec.read.append(Entry(tok, src))
            prev = tok


def _capabilities(spec: Spec, doc: SkillDoc) -> None:
    caps = doc.front.get("capabilities")
    line = doc.front_lines.get("capabilities")
    meta = doc.front.get("metadata")
    if caps is None and isinstance(meta, dict) and isinstance(meta.get("capabilities"), dict):
        caps, line = meta["capabilities"], doc.front_lines.get("metadata")
    if caps is None:
        return
    where = f"{doc.path}:{line or 1}"
    if not isinstance(caps, dict):
        raise UsageError(f"{where}:1: `capabilities` must be a mapping")
    src = f"capabilities ({SKILL_FILE}:{line or 1})"
    keymap = {
        "network": "hosts",
        "hosts": "hosts",
        "read": "read",
        "reads": "read",
        "write": "write",
        "writes": "write",
        "delete": "delete",
        "commands": "commands",
        "secrets": "secrets",
        "sequences": "sequences",
    }
    for key, raw in caps.items():
        target = keymap.get(str(key))
        if target is None:
            raise UsageError(f"{where}:1: unknown capability `{key}` (one of {', '.join(sorted(keymap))})")
        if isinstance(raw, dict) and target == "hosts":
            raw = raw.get("hosts") or raw.get("allow")
        if raw is None or raw == "none" or raw == []:
            spec.declared.append(target)
            continue
        items = raw if isinstance(raw, list) else [raw]
        entries: list[Entry] = getattr(spec, target)
        for item in items:
            if str(item) not in [e.value for e in entries]:
                entries.append(Entry(str(item), src))
        spec.declared.append(target)


def derive_spec(skill_dir: Path) -> Spec:
    """The spec of the skill in ``skill_dir`` (a directory holding SKILL.md)."""
    md = skill_dir / SKILL_FILE
    try:
        text = md.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"{md}: cannot read: {exc.strerror}", hint="a skill is a directory with SKILL.md") from None
    doc = parse_skill_md(text, str(md))
    name = doc.name or skill_dir.name
    spec = Spec(skill=name, allowed_tools=_tools(doc.front.get("allowed-tools", doc.front.get("allowed_tools"))))
    meta = doc.front.get("metadata")
    if isinstance(meta, dict):
        spec.metadata = {k: v for k, v in meta.items() if k != "capabilities"}
    _capabilities(spec, doc)
    skill_files = {str(p.relative_to(skill_dir)) for p in skill_dir.rglob("*") if p.is_file()}
    for n, line in enumerate(doc.lines, 1):
        if n in doc.hidden_lines:
            continue
        for m in _URL.finditer(line):
            host = m.group(1).lower()
            if host not in spec.values("hosts"):
                spec.hosts.append(Entry(host, f"{SKILL_FILE}:{n}"))
    for block in doc.blocks:
        if block.hidden or not block.is_shell:
            continue
        for n, line in logical_lines(block.lines, block.line):
            _from_block_line(spec, line, f"{SKILL_FILE}:{n}", skill_files)
    kinds: dict[str, str] = {}
    written = [w.value for w in spec.write]
    for e in spec.read:
        if any(fnmatch.fnmatch(e.value, w) or e.value == w for w in written):
            continue
        ext = e.value.rsplit(".", 1)[-1].lower() if "." in e.value else ""
        if ext in INPUT_KINDS:
            kinds.setdefault(ext, e.source)
    desc = str(doc.front.get("description") or "").lower()
    for word, kind in _KIND_WORDS.items():
        if re.search(rf"\b{word}\b", desc):
            kinds.setdefault(kind, f"{SKILL_FILE}:{doc.front_lines.get('description', 1)}")
    spec.inputs = [Entry(k, s) for k, s in kinds.items()]
    return spec
