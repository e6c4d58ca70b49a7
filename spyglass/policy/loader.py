"""Loading ``spyglass.yaml``: find it, parse it with positions, validate, type it.

The published JSON Schema (``spyglass/schemas/policy.schema.json``) is the
single description of the keys; every violation is reported with
``file:line:col``.  Checks the schema cannot express (host patterns, rule
directories that must exist) follow.  Nothing half-loads: any error raises
:class:`PolicyError` carrying all of them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from spyglass.errors import SourceError
from spyglass.policy import defaults
from spyglass.policy.hosts import parse_host_pattern
from spyglass.policy.locate import locate_policy
from spyglass.policy.model import (
    AnalysisPolicy,
    BrokeredSecret,
    EvidencePolicy,
    ExecPolicy,
    NetworkPolicy,
    OtlpPolicy,
    Policy,
    RetentionPolicy,
    RuleOverride,
    RulesPolicy,
    SandboxPolicy,
    TerminalPolicy,
)
from spyglass.policy.paths import check_glob, expand_home
from spyglass.policy.yamlsrc import MAX_SOURCE_BYTES, Pos, decode_source, load_documents, pos_at, to_plain

POLICY_FILE = "spyglass.yaml"


class PolicyError(SourceError):
    """One or more errors in a policy file; ``errors`` lists them all."""

    def __init__(self, errors: list[SourceError]) -> None:
        first = errors[0]
        more = f" (and {len(errors) - 1} more; `spyglass policy lint` lists them)" if len(errors) > 1 else ""
        super().__init__(first.message + more, first.path, first.line, first.col)
        self.errors = errors


def schema_path() -> Path:
    return Path(__file__).resolve().parent.parent / "schemas" / "policy.schema.json"


@lru_cache(maxsize=1)
def policy_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return data


def find_policy_file(path: str | Path | None, cwd: str | Path) -> Path | None:
    """The policy file to use by precedence (docs: policy/locate.py); None: built-in defaults.

    A ``spyglass.yaml`` in ``cwd`` is never picked up implicitly."""
    return locate_policy(path, cwd).path


def load_policy(
    path: str | Path | None = None, cwd: str | Path | None = None, *, parse: Callable[..., Policy] | None = None
) -> Policy:
    """The policy for a command run in ``cwd``: ``--policy``, ``$SPYGLASS_POLICY``, the user's
    and the system's policy file, or the built-in defaults.  ``parse``: :func:`parse_policy`,
    or one that gives its answers faster (a run's: the store's sealed cache, rules/cache.py)."""
    cwd = Path(cwd or os.getcwd())
    source = locate_policy(path, cwd)
    if source.path is None:
        return Policy.default(cwd)
    shown = str(path) if path is not None else str(source.path)
    text = read_source(source.path, shown)
    pol = (parse or parse_policy)(text, shown, base_dir=str(source.path.resolve().parent))
    return msgspec.structs.replace(pol, origin=source.origin)


def policy_file_path(policy: Policy) -> str | None:
    """The absolute path of the file a policy came from (``source`` keeps the name as given)."""
    if not policy.source:
        return None
    if os.path.isabs(policy.source):
        return policy.source
    return os.path.join(policy.base_dir, os.path.basename(policy.source))


REDACTED = "«redacted»"


def recordable_text(policy: Policy) -> str | None:
    """The policy's text as a run stores it: values that are credentials (``otlp.headers``,
    an exporter's API key for instance) are masked; everything that judges a run stays."""
    text = policy.text
    if text is None:
        return None
    for value in sorted({v for v in policy.otlp.headers.values() if v}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def policy_record(policy: Policy) -> dict[str, Any]:
    """What a run stores about its policy: where it came from, its digest and its full text
    (credentials masked, see :func:`recordable_text`)."""
    return {
        "source": policy_file_path(policy),
        "origin": policy.origin,
        "digest": policy.digest,
        "base_dir": policy.base_dir,
        "text": recordable_text(policy),
    }


def policy_from_record(rec: dict[str, Any] | None, cwd: str | Path | None = None) -> Policy:
    """The policy a run recorded (its stored text parsed again); defaults when it had none."""
    if not rec or not rec.get("text"):
        return Policy.default(rec.get("base_dir") if rec and rec.get("base_dir") else cwd)
    shown = f"{rec.get('source') or 'policy'} (as recorded with the run)"
    pol = parse_policy(str(rec["text"]), shown, base_dir=str(rec.get("base_dir") or cwd or os.getcwd()))
    # the digest is the original file's (the stored text may have credentials masked)
    return msgspec.structs.replace(pol, source=rec.get("source"), origin="recorded with the run",
                               digest=str(rec.get("digest") or pol.digest))


def policy_for_run(extra: dict[str, Any], policy_digest: str | None, cwd: str | Path) -> Policy:
    """The policy a stored run used: its recorded text; for a run that recorded none, a file
    (its ``policy_source``, else ``spyglass.yaml`` in its directory) only if its digest is the
    run's ``policy_digest`` (the same text, whoever could write it since); else the defaults."""
    rec = extra.get("policy")
    if isinstance(rec, dict):
        return policy_from_record(rec, cwd)
    candidates = [str(extra.get("policy_source") or ""), str(Path(cwd) / POLICY_FILE)]
    for cand in candidates:
        p = Path(cand) if os.path.isabs(cand) else Path(cwd) / cand if cand else None
        if p is None or not p.is_file() or not policy_digest:
            continue
        try:
            text = read_source(p, str(p))
        except SourceError:
            continue
        if hashlib.sha256(text.encode("utf-8")).hexdigest() == policy_digest:
            pol = parse_policy(text, str(p), base_dir=str(p.resolve().parent))
            return msgspec.structs.replace(pol, source=str(p.resolve()), origin="the run's file, same digest")
    return Policy.default(cwd)


def read_source(path: Path, shown: str, limit: int = MAX_SOURCE_BYTES) -> str:
    """The text of a policy or rule file: at most ``limit`` bytes of UTF-8, else a positioned error."""
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror}", shown) from None
    return decode_source(data, shown, limit)


def lint_policy(text: str, path: str, base_dir: str) -> list[SourceError]:
    """Every error in a policy text (empty: it is valid)."""
    try:
        parse_policy(text, path, base_dir=base_dir)
    except PolicyError as exc:
        return exc.errors
    except SourceError as exc:
        return [exc]
    return []


@lru_cache(maxsize=8)  # a run reads its policy twice (`follows`, then the session): parsed once
def parse_policy(text: str, path: str, *, base_dir: str) -> Policy:
    """A Policy from the text of a policy file (``path`` is only used in messages)."""
    docs = load_documents(text, path)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if not docs:
        return Policy(source=path, base_dir=base_dir, digest=digest, text=text)
    if len(docs) > 1:
        raise PolicyError([SourceError("a policy file holds one YAML document", path, *_lc(pos_at(docs[1], [])))])
    root = docs[0]
    if not isinstance(root, dict):
        raise PolicyError([SourceError("a policy file is a mapping of keys (mode, workspace, ...)", path, 1, 1)])
    data = to_plain(root)
    errors = _schema_errors(data, root, path) + _semantic_errors(data, root, path, base_dir)
    if errors:
        errors.sort(key=lambda e: (e.line or 0, e.col or 0))
        raise PolicyError(errors)
    return msgspec.structs.replace(_build(data, path, base_dir, digest), text=text)


def _lc(p: Pos) -> tuple[int | None, int | None]:
    return p.line, p.col


def _dotted(path: list[Any]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "the policy"


def _schema_errors(data: Any, root: Any, path: str) -> list[SourceError]:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(policy_schema())
    errors: list[SourceError] = []
    for err in _expand_one_of(validator.iter_errors(data)):
        where = list(err.absolute_path)
        name = _dotted(where)
        if err.validator == "oneOf":
            msg = f"{name} must be a list of globs or a mapping (paths, broker), not {_kind(err.instance)}"
            errors.append(SourceError(msg, path, *_lc(pos_at(root, where))))
            continue
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = sorted(err.schema.get("properties", {}))
            for key in err.instance:
                if key in known:
                    continue
                msg = f"unknown key {key!r} in {name}" if where else f"unknown key {key!r}"
                if known:
                    msg += f" (known: {', '.join(known)})"
                errors.append(SourceError(msg, path, *_lc(pos_at(root, [*where, key], as_key=True))))
            continue
        if err.validator == "enum":
            opts = ", ".join(str(o) for o in err.validator_value)
            msg = f"bad value {err.instance!r} for {name}: expected one of {opts}"
        elif err.validator == "type":
            want = err.validator_value
            what = {"array": "a list", "object": "a mapping", "string": "a string", "integer": "a whole number",
                    "boolean": "true or false"}.get(want, str(want))
            msg = f"{name} must be {what}, not {_kind(err.instance)}"
        elif err.validator == "minLength":
            msg = f"{name} must not be empty"
        elif err.validator == "minProperties":
            msg = f"{name} needs at least one of: level, action"
        elif err.validator == "minimum":
            msg = f"{name} must be at least {err.validator_value}"
        else:
            msg = f"{name}: {err.message}"
        errors.append(SourceError(msg, path, *_lc(pos_at(root, where))))
    return errors


def _expand_one_of(errs: Any) -> list[Any]:
    """A ``oneOf`` between a list and a mapping: report the errors of the branch the value's type picks."""
    out = []
    for err in errs:
        if err.validator == "oneOf" and isinstance(err.instance, list | dict) and err.context:
            branch = 0 if isinstance(err.instance, list) else 1
            sub = [e for e in err.context if e.relative_schema_path and e.relative_schema_path[0] == branch]
            if sub:
                out.extend(_expand_one_of(sub))
                continue
        out.append(err)
    return out


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, int | float):
        return f"the number {v}"
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a mapping"
    return "null" if v is None else type(v).__name__


#: every key of the policy that holds path patterns (one dialect: spyglass.policy.paths)
GLOB_KEYS: tuple[tuple[str, ...], ...] = (
    ("secrets",),
    ("honeytokens",),
    ("evidence", "manifest_exclude"),
    ("analysis", "grading_paths"),
    ("analysis", "ignore_paths"),
)


def _glob_errors(data: dict[str, Any], root: Any, path: str) -> list[SourceError]:
    """Each path pattern compiled now, so a bad one stops the policy, not a run later."""
    errors: list[SourceError] = []
    for keys in GLOB_KEYS:
        node: Any = data
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        for i, pat in enumerate(node if isinstance(node, list) else []):
            if not isinstance(pat, str):
                continue
            bad = check_glob(pat)
            if bad is not None:
                line, col = _lc(pos_at(root, [*keys, i]))
                errors.append(SourceError(f"{'.'.join(keys)}[{i}]: {bad}", path, line, col))
    return errors


def _semantic_errors(data: dict[str, Any], root: Any, path: str, base_dir: str) -> list[SourceError]:
    errors: list[SourceError] = _glob_errors(data, root, path)
    net = data.get("network")
    net = net if isinstance(net, dict) else {}
    for key in ("allow", "deny"):
        pats = net.get(key)
        for i, pat in enumerate(pats if isinstance(pats, list) else []):
            if not isinstance(pat, str):
                continue
            try:
                parse_host_pattern(pat)
            except ValueError as exc:
                errors.append(SourceError(f"network.{key}[{i}]: {exc}", path, *_lc(pos_at(root, ["network", key, i]))))
    errors.extend(_retention_errors(data, root, path))
    errors.extend(_broker_errors(data, root, path))
    errors.extend(_terminal_errors(data, root, path))
    rules = data.get("rules")
    rules = rules if isinstance(rules, dict) else {}
    paths = rules.get("paths")
    for i, p in enumerate(paths if isinstance(paths, list) else []):
        if not isinstance(p, str) or not p:
            continue
        full = expand_home(p, os.path.expanduser("~"))
        if not os.path.isabs(full):
            full = os.path.join(base_dir, full)
        if not os.path.exists(full):
            errors.append(
                SourceError(f"rules.paths[{i}]: no such file or directory: {p}", path,
                            *_lc(pos_at(root, ["rules", "paths", i])))
            )
    return errors


def _retention_errors(data: dict[str, Any], root: Any, path: str) -> list[SourceError]:
    from spyglass.units import parse_age, parse_size

    rt = data.get("retention")
    if not isinstance(rt, dict):
        return []
    errors = []
    for key, parse in (("max_age", parse_age), ("max_size", parse_size)):
        v = rt.get(key)
        if isinstance(v, str | int) and not isinstance(v, bool):
            try:
                parse(v)
            except ValueError as exc:
                errors.append(SourceError(f"retention.{key}: {exc}", path, *_lc(pos_at(root, ["retention", key]))))
    return errors


def _terminal_errors(data: dict[str, Any], root: Any, path: str) -> list[SourceError]:
    import re

    term = data.get("terminal")
    pats = term.get("redact") if isinstance(term, dict) else None
    errors = []
    for i, pat in enumerate(pats if isinstance(pats, list) else []):
        if isinstance(pat, str):
            try:
                re.compile(pat)
            except re.error as exc:
                errors.append(SourceError(f"terminal.redact[{i}]: bad regular expression: {exc}", path,
                                          *_lc(pos_at(root, ["terminal", "redact", i]))))
    return errors


def _broker(data: Any) -> tuple[BrokeredSecret, ...]:
    out = []
    for name, s in (data or {}).items():
        out.append(BrokeredSecret(
            name=str(name), env=s["env"], hosts=_t(s.get("hosts")), from_env=s.get("from_env"),
            from_file=s.get("from_file"), mint=s.get("mint"), revoke=s.get("revoke"),
            header=s.get("header", "Authorization"), scheme=s.get("scheme", "bearer"),
        ))
    return tuple(out)


def _broker_errors(data: dict[str, Any], root: Any, path: str) -> list[SourceError]:
    secrets = data.get("secrets")
    broker = secrets.get("broker") if isinstance(secrets, dict) else None
    errors: list[SourceError] = []
    envs: dict[str, str] = {}
    for name, s in (broker if isinstance(broker, dict) else {}).items():
        if not isinstance(s, dict):
            continue
        where = _lc(pos_at(root, ["secrets", "broker", name], as_key=True))
        sources = [k for k in ("from_env", "from_file", "mint") if k in s]
        if len(sources) != 1:
            errors.append(SourceError(
                f"secrets.broker.{name}: give exactly one of from_env, from_file, mint"
                + (f" (found {', '.join(sources)})" if sources else ""), path, *where))
        if "revoke" in s and "mint" not in s:
            errors.append(SourceError(f"secrets.broker.{name}: revoke goes with mint", path,
                                      *_lc(pos_at(root, ["secrets", "broker", name, "revoke"]))))
        env = s.get("env")
        if isinstance(env, str):
            if env in envs:
                errors.append(SourceError(f"secrets.broker.{name}: env {env} is also used by {envs[env]}", path,
                                          *_lc(pos_at(root, ["secrets", "broker", name, "env"]))))
            envs[env] = str(name)
        hosts = s.get("hosts")
        for i, host in enumerate(hosts if isinstance(hosts, list) else []):
            if isinstance(host, str):
                try:
                    parse_host_pattern(host)
                except ValueError as exc:
                    errors.append(SourceError(f"secrets.broker.{name}.hosts[{i}]: {exc}", path,
                                              *_lc(pos_at(root, ["secrets", "broker", name, "hosts", i]))))
    return errors


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _t(v: Any) -> tuple[str, ...]:
    return tuple(v or ())


def _build(data: dict[str, Any], path: str, base_dir: str, digest: str) -> Policy:
    def absdir(p: str) -> str:
        p = os.path.expanduser(p) if p.startswith("~") else p
        return os.path.normpath(p if os.path.isabs(p) else os.path.join(base_dir, p))

    secrets = data.get("secrets") or ()
    net = data.get("network") or {}
    ex = data.get("exec") or {}
    rules = data.get("rules") or {}
    sb = data.get("sandbox") or {}
    ev = data.get("evidence") or {}
    an = data.get("analysis") or {}
    ot = data.get("otlp") or {}
    rt = data.get("retention") or {}
    term = data.get("terminal") or {}
    ev_defaults = EvidencePolicy()
    return Policy(
        mode=data.get("mode", "observe"),
        fail_on=data.get("fail_on"),
        descendants=data.get("descendants"),
        workspace=tuple(absdir(w) for w in data.get("workspace") or ()),
        secrets=_t(secrets.get("paths")) if isinstance(secrets, dict) else _t(secrets),
        broker=_broker(secrets.get("broker") if isinstance(secrets, dict) else None),
        honeytokens=_t(data.get("honeytokens")),
        network=NetworkPolicy(
            allow=_t(net.get("allow")), deny=_t(net.get("deny")), builtin_allow=net.get("builtin_allow", True)
        ),
        exec=ExecPolicy(trusted=tuple(t if t.startswith("~") else absdir(t) for t in ex.get("trusted") or ())),
        rules=RulesPolicy(
            paths=tuple(absdir(p) for p in rules.get("paths") or ()),
            disable=_t(rules.get("disable")),
            overrides={k: RuleOverride(level=v.get("level"),
                                       action=v.get("action"), enabled=v.get("enabled"),
                                       exceptions=tuple(v.get("exceptions") or ()),
                                       append=dict(v.get("append") or {}), override=dict(v.get("override") or {}))
                       for k, v in (rules.get("overrides") or {}).items()},
            library=dict(rules.get("library") or {}),
        ),
        sandbox=SandboxPolicy(
            writable=_t(sb.get("writable")), readonly=_t(sb.get("readonly")),
            hidden=_t(sb.get("hidden")), pass_home=_t(sb.get("pass_home")),
            env_pass=_t((sb.get("env") or {}).get("pass")),
        ),
        evidence=EvidencePolicy(
            sign_key=ev.get("sign_key"),
            manifest_exclude=tuple(ev.get("manifest_exclude", ev_defaults.manifest_exclude)),
            max_files=ev.get("max_files", ev_defaults.max_files),
            max_diff_bytes=ev.get("max_diff_bytes", ev_defaults.max_diff_bytes),
            max_run_diff_bytes=ev.get("max_run_diff_bytes", ev_defaults.max_run_diff_bytes),
            test_patterns=tuple(ev.get("test_patterns", ev_defaults.test_patterns)),
        ),
        gate=_t(data.get("gate")) or defaults.DEFAULT_GATE,
        analysis=AnalysisPolicy(grading_paths=_t(an.get("grading_paths")), ignore_paths=_t(an.get("ignore_paths"))),
        agent_id=data.get("agent_id"),
        otlp=OtlpPolicy(
            endpoint=ot.get("endpoint"), protocol=ot.get("protocol"),
            headers={str(k): str(v) for k, v in (ot.get("headers") or {}).items()}, timeout=ot.get("timeout"),
        ),
        retention=RetentionPolicy(
            max_age=_str_or_none(rt.get("max_age")), max_size=_str_or_none(rt.get("max_size")),
            max_runs_per_task=rt.get("max_runs_per_task"), keep_level=rt.get("keep_level", "high"),
        ),
        terminal=TerminalPolicy(record=bool(term.get("record", False)), redact=_t(term.get("redact"))),
        source=path,
        base_dir=base_dir,
        digest=digest,
    )
