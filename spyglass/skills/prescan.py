# ruff: noqa: E501  (long patterns and XML literals read better whole)
"""Static pre-scan of a skill: what its text and code suggest before it is run.

Findings are hints: a ``warn`` finding raises a verdict to ``uncertain`` at
most, an ``info`` finding only informs; neither is a verdict alone (only what a
run does is).  Checks: obfuscation (long base64/hex blobs, eval/exec of decoded
data), ``curl | sh`` and download-then-execute, secret paths, network tools,
and instructions in SKILL.md aimed at the agent rather than the reader (HTML
comments, zero-width characters, "ignore previous instructions", "do not tell
the user").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import msgspec

from spyglass.skills.skillmd import SKILL_FILE, parse_skill_md

MAX_FILE_BYTES: Final = 2 * 1024 * 1024
_TEXT_EXT: Final = frozenset({".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".md", ".txt", ""})


class Finding(msgspec.Struct, frozen=True):
    check: str
    severity: str  # "warn" raises to uncertain; "info" does not
    file: str  # relative to the skill directory
    line: int
    text: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "text": self.text,
            "message": self.message,
        }

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


_Check = tuple[str, str, re.Pattern[str], str]  # check, severity, pattern, what it found


def _checks(check: str, severity: str, *found: tuple[str, str]) -> list[_Check]:
    """The checks of one kind, each a (pattern, what it finds) pair."""
    return [(check, severity, re.compile(pattern), what) for pattern, what in found]


_CODE_CHECKS: Final[list[_Check]] = [
    *_checks(
        "obfuscation",
        "warn",
        (r"[A-Za-z0-9+/]{120,}={0,2}", "a long base64 blob"),
        (r"(?:\\x[0-9a-fA-F]{2}){24,}|\b[0-9a-fA-F]{96,}\b", "a long hex blob"),
        (
            r"\b(?:exec|eval)\s*\(\s*(?:\w+\.)*(?:b64decode|b16decode|decode|decompress|unhexlify|fromhex|"
            r"loads|codecs\.decode|bytes\.fromhex|atob|Buffer\.from)",
            "eval/exec of decoded data",
        ),
        (r"\b(?:exec|eval)\s*\(\s*(?:compile\s*\()?\s*[a-z_]*(?:payload|blob|data|code)\b", "eval/exec of a computed string"),
        (r"base64\s+(?:-d|--decode)[^\n|]*\|\s*(?:ba|z|da)?sh\b", "decoded data run by a shell"),
    ),
    *_checks(
        "remote-exec",
        "warn",
        (r"\b(?:curl|wget|fetch)\b[^\n|;]*\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b", "curl | sh"),
        (r"\b(?:curl|wget)\b[^\n]*(?:-o|-O|>)\s*\S+[^\n]*(?:&&|;)\s*(?:chmod\s+\+x|sh|bash|\./)", "download then execute"),
        (r"urlopen\([^)]*\)\.read\(\)[^\n]*\)\s*$|exec\(\s*urlopen|exec\(\s*requests\.get", "code fetched and executed"),
    ),
    *_checks(
        "secret-path",
        "warn",
        (
            r"(?:~|\$HOME|expanduser\([\"']~)[/\"' +,]*\.(?:ssh|aws|gnupg|netrc|git-credentials|docker/config|kube/config|"
            r"config/gh)|/etc/shadow|\bid_rsa\b|\bid_ed25519\b",
            "a secret path",
        ),
    ),
    *_checks(
        "persistence",
        "warn",
        (r"\.(?:bashrc|zshrc|profile|bash_profile)\b|crontab|authorized_keys|systemd/user", "a persistence location"),
    ),
    *_checks(
        "destructive",
        "warn",
        (
            r"\brm\s+-[a-zA-Z]*[rf][a-zA-Z]*\s+(?:~|\$HOME|/(?:\s|$)|\*)|shutil\.rmtree\(\s*(?:os\.path\.expanduser|Path\.home)",
            "a destructive delete",
        ),
    ),
    *_checks(
        "network-tool",
        "info",
        (r"(?:^|[\s;|&(`])(?:curl|wget|nc|ncat|socat|telnet|scp|ssh|ftp)\s", "a network tool"),
    ),
]

_AGENT_PHRASES: Final = re.compile(
    r"ignore (?:all |any )?(?:previous|prior|above) instructions|do not (?:tell|inform|mention)[^.\n]{0,20}user|"
    r"don't (?:tell|mention)[^.\n]{0,20}user|without (?:telling|asking|informing) the user|silently|"
    r"you are now|system prompt|disregard (?:the )?(?:previous|above)",
    re.IGNORECASE,
)
_ZERO_WIDTH: Final = re.compile("[\u200b\u200c\u200d\u2060\u2062\u2063\u2064\ufeff\u202e\u202d\u00ad]")


def _skill_md_findings(text: str) -> list[Finding]:
    doc = parse_skill_md(text)
    out: list[Finding] = []

    def hidden(n: int, text: str, message: str) -> None:
        out.append(Finding("hidden-instruction", "warn", SKILL_FILE, n, text, message))

    reported_comment = False
    for n, line in enumerate(doc.lines, 1):
        if n in doc.hidden_lines and not reported_comment and line.strip():
            hidden(n, line.strip()[:160], "an HTML comment: the agent reads it, a person viewing the rendered page does not")
            reported_comment = True
        elif n not in doc.hidden_lines:
            reported_comment = False
        if _ZERO_WIDTH.search(line):
            hidden(n, line.strip()[:160].encode("unicode_escape").decode(), "zero-width or direction-changing characters")
        m = _AGENT_PHRASES.search(line)
        if m:
            hidden(n, line.strip()[:160], f"an instruction aimed at the agent: {m.group(0)!r}")
    return out


def _code_findings(rel: str, text: str) -> list[Finding]:
    out: list[Finding] = []
    for n, line in enumerate(text.splitlines(), 1):
        for check, severity, pattern, what in _CODE_CHECKS:
            if pattern.search(line):
                out.append(Finding(check, severity, rel, n, line.strip()[:160], what))
    return out


def prescan(skill_dir: Path) -> list[Finding]:
    """Findings for every text file of the skill, sorted by file and line."""
    findings: list[Finding] = []
    for path in sorted(skill_dir.rglob("*")):
        if not path.is_file() or any(
            p.startswith(".") or p == "__pycache__" for p in path.relative_to(skill_dir).parts
        ):
            continue
        if path.suffix.lower() not in _TEXT_EXT or path.stat().st_size > MAX_FILE_BYTES:
            continue
        rel = str(path.relative_to(skill_dir))
        text = path.read_text(encoding="utf-8", errors="replace")
        if rel == SKILL_FILE:
            findings.extend(_skill_md_findings(text))
        findings.extend(_code_findings(rel, text))
    return sorted(set(findings), key=lambda f: (f.file, f.line, f.check))
