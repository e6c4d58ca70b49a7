"""The witness's own files out of the run's reach: the store, the policy, rule files and the signing key."""

from spyglass.witness.guard import KEY_READ_RULE, TAMPER_RULE, WitnessGuard
from spyglass.witness.protected import Protected

__all__ = ["KEY_READ_RULE", "TAMPER_RULE", "Protected", "WitnessGuard"]
