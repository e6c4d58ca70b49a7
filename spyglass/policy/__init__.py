"""The policy file (``spyglass.yaml``): typed, validated, with safe defaults."""

from spyglass.policy.loader import (
    POLICY_FILE,
    PolicyError,
    find_policy_file,
    lint_policy,
    load_policy,
    parse_policy,
    schema_path,
)
from spyglass.policy.model import (
    MODES,
    AnalysisPolicy,
    EvidencePolicy,
    ExecPolicy,
    NetworkPolicy,
    Policy,
    RuleOverride,
    RulesPolicy,
    SandboxPolicy,
)

__all__ = [
    "MODES",
    "POLICY_FILE",
    "AnalysisPolicy",
    "EvidencePolicy",
    "ExecPolicy",
    "NetworkPolicy",
    "Policy",
    "PolicyError",
    "RuleOverride",
    "RulesPolicy",
    "SandboxPolicy",
    "find_policy_file",
    "lint_policy",
    "load_policy",
    "parse_policy",
    "schema_path",
]
