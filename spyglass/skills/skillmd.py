"""SKILL.md read as a person and an agent read it: front matter, text, code blocks, hidden regions.

Pure parsing (text in, structures out).  Line numbers are 1-based lines of the
file, so every derived fact can say ``SKILL.md:LINE``.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
import yaml

from spyglass.errors import UsageError

SKILL_FILE: Final = "SKILL.md"
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
SHELL_LANGS: Final = frozenset({"", "sh", "bash", "shell", "console", "zsh"})


class CodeBlock(msgspec.Struct):
    lang: str
    line: int  # line of the first line of code (after the fence)
    lines: list[str]
    hidden: bool = False  # inside an HTML comment

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def is_shell(self) -> bool:
        return self.lang.lower() in SHELL_LANGS


class SkillDoc(msgspec.Struct):
    path: str
    front: dict[str, Any]
    front_lines: dict[str, int]  # top-level key -> line
    lines: list[str]  # every line of the file
    body_start: int  # first line of the body
    blocks: list[CodeBlock] = msgspec.field(default_factory=list)
    hidden_lines: set[int] = msgspec.field(default_factory=set)  # lines inside HTML comments

    @property
    def name(self) -> str | None:
        name = self.front.get("name")
        return str(name) if name is not None else None

    def text_lines(self) -> list[tuple[int, str]]:
        """(line, text) of the body outside code blocks."""
        in_code = {b.line + i for b in self.blocks for i in range(len(b.lines))}
        return [(n, t) for n, t in enumerate(self.lines, 1) if n >= self.body_start and n not in in_code]


def _front_matter(lines: list[str], path: str) -> tuple[dict[str, Any], dict[str, int], int]:
    if not lines or lines[0].strip() != "---":
        return {}, {}, 1
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise UsageError(f"{path}:1:1: front matter starts with --- but never ends")
    text = "\n".join(lines[1:end])
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{mark.line + 2}:{mark.column + 1}" if mark is not None else "2:1"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{path}:{where}: front matter is not valid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}:2:1: front matter must be a mapping (name: ..., description: ...)")
    key_lines: dict[str, int] = {}
    for i in range(1, end):
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:", lines[i])
        if m and m.group(1) not in key_lines:
            key_lines[m.group(1)] = i + 1
    return data, key_lines, end + 2


def parse_skill_md(text: str, path: str = SKILL_FILE) -> SkillDoc:
    lines = text.splitlines()
    front, key_lines, body_start = _front_matter(lines, path)
    doc = SkillDoc(path=path, front=front, front_lines=key_lines, lines=lines, body_start=body_start)
    in_comment = False
    fence: str | None = None
    block: CodeBlock | None = None
    for n in range(body_start, len(lines) + 1):
        line = lines[n - 1]
        if fence is not None and block is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                doc.blocks.append(block)
                fence, block = None, None
            else:
                block.lines.append(line)
            if in_comment:
                doc.hidden_lines.add(n)
            if "-->" in line and in_comment:
                in_comment = False
            continue
        start_comment = "<!--" in line
        if start_comment or in_comment:
            doc.hidden_lines.add(n)
        if start_comment and "-->" not in line.split("<!--", 1)[1]:
            in_comment = True
        elif in_comment and "-->" in line:
            in_comment = False
        m = _FENCE.match(line)
        if m:
            fence = m.group(2)
            block = CodeBlock(lang=m.group(3), line=n + 1, lines=[], hidden=in_comment)
    if block is not None:  # an unclosed fence runs to the end, as in CommonMark
        doc.blocks.append(block)
    return doc
