"""Skill verification grounded in execution: does a third-party skill do only what it declares?

* :mod:`~spyglass.skills.skillmd` — SKILL.md parsed (front matter, code blocks, hidden regions);
* :mod:`~spyglass.skills.spec` — the declared behaviour, derived and editable (``skill spec``);
* :mod:`~spyglass.skills.prescan` — static hints (obfuscation, curl|sh, hidden instructions ...);
* :mod:`~spyglass.skills.samples`, :mod:`~spyglass.skills.workspace`, :mod:`~spyglass.skills.standin`,
  :mod:`~spyglass.skills.audit` — the sandboxed workspace, its inputs, the host stand-in, the audit hook;
* :mod:`~spyglass.skills.judge` — a run held against the spec and the rule pack;
* :mod:`~spyglass.skills.verify` — ``skill verify``: runs, verdict, reports;
* :mod:`~spyglass.skills.scan` — ``skill scan``: many skills in parallel.
"""

from __future__ import annotations
