"""GlobMatcher gives exactly compile_globs's answers (it only skips work): checked on the
built-in secret globs, the rule pack's shapes and random paths (seeded, bounded)."""

from __future__ import annotations

import random

import pytest

from spyglass.policy import Policy
from spyglass.policy import defaults as pdefaults
from spyglass.policy.paths import GlobMatcher, compile_globs

HOME = "/home/dev"
SHAPES = [
    "a/b/*.key", "relname", "/x/[ab]/**", "**/deep/**/x", "~/", "/abs/dir/", "**/*.pem", "**/spy?.k", "**/**/q",
    "**/.git/config", "**/.git/hooks/*", "**/.ssh/authorized_keys*", "*/x/", "q/**", "**/a\\*b/c", "[ab]/q",
    "/etc/cron.*/**", "~/.local/state/**/*.log", "a/**/b", "x**y", "/proc/*/environ", "/Etc/K\u212ay/**",
]  # fmt: skip
WORDS = ["/", "A", "SSH", "\u017f", "\u212a", "Env",
         "a", ".ssh", ".env", "home", "dev", "x", "deep", "id_rsa", ".key", "spy", "*", ".", "etc", "shadow",
         "ssh_host_1_key", "ssh", "q", ".example", ".git", "config", "hooks", "authorized_keys", "b", "a*b", "c",
         "cron.d", "local", "state", ".log", "y", "\n", "proc", "12", "environ"]


@pytest.mark.parametrize("patterns", [
    list(Policy.default().secret_globs), list(pdefaults.SECRET_EXCEPTIONS), SHAPES,
    list(Policy.default().secret_globs) + SHAPES, ["**"], [],
])  # fmt: skip
@pytest.mark.parametrize("cased", [True, False])
def test_same_answers_as_the_regex(patterns: list[str], cased: bool) -> None:
    rx, gm = compile_globs(patterns, HOME, cased=cased), GlobMatcher(patterns, HOME, cased=cased)
    rnd = random.Random(19)
    fixed = ["/home/dev/.ssh", "/home/dev/.ssh/id_rsa", "/home/dev/.sshx", "/ws/.env", "/ws/.env.example", ".env",
             "/etc/shadow", "/q/deep/r/x", "a/b/c.key", "/ws/.git/config", "/ws/.git/hooks/pre-commit", "q/", "/"]
    for _ in range(20000):
        p = "".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 9)))
        fixed.append(rnd.choice(["", "/", "/home/dev/"]) + p)
    for p in fixed:
        assert (gm.fullmatch(p) is not None) == (rx.fullmatch(p) is not None), p


@pytest.mark.parametrize("bad", ["/x/[z-a]/**", "**/a[", "/ok/**/[]"])
def test_a_bad_glob_is_refused_at_construction(bad: str) -> None:
    """Expressions compile at their first use, but a glob that is no glob still fails at once."""
    from spyglass.policy.paths import GlobError

    with pytest.raises(GlobError):
        GlobMatcher(["/fine/**", bad], HOME)


def test_base_name_verdicts_stay_under_their_cap_and_answer_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from spyglass.policy import paths

    monkeypatch.setattr(paths, "BASES_MAX", 64)
    gm = GlobMatcher(["**/id_rsa*", "**/.env"], HOME)
    for i in range(500):
        assert gm.fullmatch(f"/src/m{i}.py") is None
        assert gm.fullmatch(f"/keys/id_rsa{i}") is True
        assert len(gm._bases) <= 64
    assert gm.fullmatch("/keys/id_rsa0") is True and gm.fullmatch("/src/m0.py") is None and gm.fullmatch("/a/.env")


def test_one_matcher_per_list_of_globs_in_a_process() -> None:
    """glob_matcher hands out one GlobMatcher per (globs, home, case): the rule pack's functions
    ask for the same lists hundreds of times.  A bad glob is refused every time it is asked for."""
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.policy import paths
    from spyglass.policy.paths import GlobError, glob_matcher
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset

    a = glob_matcher(["**/.env", "~/.ssh/**"], HOME)
    assert glob_matcher(("**/.env", "~/.ssh/**"), HOME) is a
    assert glob_matcher(["**/.env", "~/.ssh/**"], HOME, cased=False) is not a
    assert glob_matcher(["**/.env", "~/.ssh/**"], "/home/other") is not a
    for _ in range(2):
        with pytest.raises(GlobError):
            glob_matcher(["/fine/**", "**/a["], HOME)

    built: list[tuple[str, ...]] = []
    real = paths.GlobMatcher.__init__

    def counting(self: GlobMatcher, patterns: object, home: str | None = None, *, cased: bool = True) -> None:
        built.append(tuple(patterns))  # type: ignore[call-overload]
        real(self, built[-1], home, cased=cased)

    paths._glob_matcher.cache_clear()
    try:
        paths.GlobMatcher.__init__ = counting  # type: ignore[method-assign]
        engine = RuleEngine(load_ruleset(), home="/home/pack-test")
        Pipeline([engine], RunContext(root_cwd="/w", workspace=["/w"])).start()
        engine.warm(lambda: True)
    finally:
        paths.GlobMatcher.__init__ = real  # type: ignore[method-assign]
    assert built and len(built) == len(set(built))
