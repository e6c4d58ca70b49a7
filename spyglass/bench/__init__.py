"""``spyglass bench``: run an agent over a task suite, repeated and injected; reliability and detection tables.

    from spyglass.bench import load_suite, BenchConfig, run_bench, AgentSpec
    cfg = BenchConfig(suite=load_suite("tasks/"), agent=AgentSpec.parse("codex"), out=Path("b"), repeat=3)
    results = run_bench(cfg)
    tables = compute(results, cfg.out / "store", {t.name: str(t.dir) for t in cfg.suite.tasks})
"""

from spyglass.bench.inject import Injection, load_injections
from spyglass.bench.runner import BenchConfig, run_bench
from spyglass.bench.suite import Suite, Task, load_suite
from spyglass.bench.tables import Tables, compute
from spyglass.bench.trial import AgentSpec, TrialResult

__all__ = [
    "AgentSpec", "BenchConfig", "Injection", "Suite", "Tables", "Task", "TrialResult", "compute",
    "load_injections", "load_suite", "run_bench",
]
