"""``spyglass skill scan``: verify many skills in parallel, bounded by the machine's cores.

Each skill is verified in a worker process of its own (a fresh interpreter per
skill is what keeps one skill's sandbox, proxy and stand-in apart from the
next); results come back as dictionaries and are rebuilt for the report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from spyglass.errors import SpyglassError
from spyglass.skills.skillmd import SKILL_FILE


def find_skills(dirs: Iterable[Path], depth: int = 4) -> list[Path]:
    """Every directory holding a SKILL.md, at or below each of ``dirs`` (up to ``depth`` levels)."""
    out: list[Path] = []
    for d in dirs:
        d = d.resolve()
        if (d / SKILL_FILE).is_file():
            out.append(d)
            continue
        for root, subdirs, files in os.walk(d):
            rel = Path(root).relative_to(d)
            subdirs[:] = sorted(
                s for s in subdirs if not s.startswith(".") and s not in ("node_modules", "__pycache__")
            )
            if len(rel.parts) >= depth:
                subdirs[:] = []
            if SKILL_FILE in files:
                out.append(Path(root))
                subdirs[:] = []
    return sorted(dict.fromkeys(out))


def _worker(skill: str, store: str, repeat: int, html_dir: str | None, agent: str) -> dict[str, Any]:
    from spyglass.errors import EXIT_CANNOT_RUN, EXIT_USAGE, SpyglassError
    from spyglass.skills.verify import verify_skill
    from spyglass.store import Store

    try:
        r = verify_skill(
            Path(skill),
            Store(Path(store), create=True),
            repeat=repeat,
            html_dir=Path(html_dir) if html_dir else None,
            agent=agent,
        )
        return r.to_dict()
    except SpyglassError as exc:
        if exc.exit_code in (EXIT_CANNOT_RUN, EXIT_USAGE):  # no sandbox, bad --agent: the scan stops
            return {"fatal": exc.message, "exit_code": exc.exit_code, "hint": exc.hint}
        return {
            "skill": Path(skill).name,
            "dir": skill,
            "verdict": "uncertain",
            "error": str(exc),
            "violations": [],
            "uncertain_because": [f"could not verify: {exc}"],
            "prescan": [],
            "runs": [],
            "seconds": 0.0,
        }


def scan(
    skills: list[Path],
    store: Path,
    *,
    repeat: int = 1,
    jobs: int | None = None,
    html_dir: Path | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    agent: str = "compliant",
) -> list[dict[str, Any]]:
    """Verify ``skills`` with up to ``jobs`` workers (default: the number of cores); results in input order."""
    jobs = max(1, jobs or os.cpu_count() or 1)
    results: dict[str, dict[str, Any]] = {}
    with ProcessPoolExecutor(max_workers=min(jobs, max(1, len(skills)))) as pool:
        futures = {
            pool.submit(_worker, str(s), str(store), repeat, str(html_dir) if html_dir else None, agent): str(s)
            for s in skills
        }
        for fut in as_completed(futures):
            res = fut.result()
            if "fatal" in res:
                for other in futures:
                    other.cancel()
                err = SpyglassError(res["fatal"], hint=res.get("hint"))
                err.exit_code = int(res["exit_code"])
                raise err
            results[futures[fut]] = res
            if progress is not None:
                progress(res)
    return [results[str(s)] for s in skills]
