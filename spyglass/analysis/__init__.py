"""Reliability analysis: profiles, similarity, skill coverage, unexplained activity.

The Python API (the CLI commands ``profile``, ``compare``, ``diff``,
``coverage`` and ``unexplained`` are thin layers over it)::

    from spyglass import analysis

    p = analysis.load_profile("latest")                      # star graph of a run
    analysis.similarity(p, analysis.load_profile(other))     # per kind and combined
    analysis.compare_runs(ids, by_task=True)                 # matrix, margins per task
    analysis.diff_runs(a, b)                                 # only in A / only in B / changed
    analysis.coverage("latest", ["skills/pdf"])              # skill coverage
    analysis.unexplained_run("latest")                       # against the other runs of its task

Lower-level pieces work on events and profiles without a store:
``profile_events``, ``ProfileBuilder`` (a pipeline sink), ``similarity_matrix``,
``separation``, ``diff_profiles``, ``skill_coverage``, ``unexplained``.
"""

from spyglass.analysis.coverage import (
    Finding,
    SkillCoverage,
    coverage_of_events,
    coverage_run,
    skill_coverage,
)
from spyglass.analysis.diff import ProfileDiff, diff_profiles
from spyglass.analysis.normalize import (
    FOLDS,
    NOISE_CLASSES,
    GlobSet,
    Normalizer,
    NormalizeRules,
    RunPlaces,
)
from spyglass.analysis.profile import KINDS, Profile, ProfileBuilder, places_for, profile_events, profile_run
from spyglass.analysis.runs import (
    compare_runs,
    coverage,
    diff_runs,
    labelled_runs,
    load_profile,
    open_runs,
    profile_runs,
    runs_of_task,
    unexplained_run,
)
from spyglass.analysis.similarity import (
    Separation,
    Similarity,
    SimilarityMatrix,
    compare,
    separation,
    similarity,
    similarity_matrix,
    weighted_jaccard,
)
from spyglass.analysis.skills import Skill, find_skills, load_skill
from spyglass.analysis.unexplained import DEFAULT_GRADING_PATHS, UnexplainedReport, unexplained

__all__ = [
    "DEFAULT_GRADING_PATHS",
    "FOLDS",
    "KINDS",
    "NOISE_CLASSES",
    "Finding",
    "GlobSet",
    "NormalizeRules",
    "Normalizer",
    "Profile",
    "ProfileBuilder",
    "ProfileDiff",
    "RunPlaces",
    "Separation",
    "Similarity",
    "SimilarityMatrix",
    "Skill",
    "SkillCoverage",
    "UnexplainedReport",
    "compare",
    "compare_runs",
    "coverage",
    "coverage_of_events",
    "coverage_run",
    "diff_profiles",
    "diff_runs",
    "find_skills",
    "labelled_runs",
    "load_profile",
    "load_skill",
    "open_runs",
    "places_for",
    "profile_events",
    "profile_run",
    "profile_runs",
    "runs_of_task",
    "separation",
    "similarity",
    "similarity_matrix",
    "skill_coverage",
    "unexplained",
    "unexplained_run",
    "weighted_jaccard",
]
