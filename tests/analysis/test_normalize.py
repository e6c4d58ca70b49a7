"""Normalization rules: placeholders, folds, noise classes, globs."""

from __future__ import annotations

import pytest

from spyglass.analysis.normalize import GlobSet, Normalizer, NormalizeRules, RunPlaces, glob_to_regex

WS = "/tmp/pytest-of-u/pytest-9/test_x0/ws"
PLACES = RunPlaces(workspace=[WS], cwd=WS, home="/home/u", store="/home/u/.spyglass",
                   skills=["/opt/skills/pdf"])


@pytest.fixture
def norm() -> Normalizer:
    return Normalizer(PLACES)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (f"{WS}/src/main.py", "<WS>/src/main.py"),
        (WS, "<WS>"),
        ("/home/u/.bashrc", "<HOME>/.bashrc"),
        ("/home/u/.spyglass/runs/x", "<STORE>/runs/x"),
        ("/opt/skills/pdf/SKILL.md", "<SKILL:pdf>/SKILL.md"),
        ("/opt/skills/pdfx/SKILL.md", "/opt/skills/pdfx/SKILL.md"),
        ("/tmp/tmpk3j_9x2a/out.json", "<TMP>/tmp<rand>/out.json"),
        ("/tmp/tmpabcdefgh", "<TMP>/tmp<rand>"),
        ("/tmp/tmp.Xy3kL9pQ2a", "<TMP>/tmp.<rand>"),
        ("/var/tmp/build-q8w_e7r6/log", "<TMP>/build-<rand>/log"),
        ("/tmp/pytest-of-bob/pytest-41/t0/f", "<TMP>/pytest-of-<user>/pytest-<n>/t0/f"),
        ("/proc/31337/status", "/proc/<pid>/status"),
        ("/proc/31337/task/31338/comm", "/proc/<pid>/task/<tid>/comm"),
        ("/proc/self/maps", "/proc/self/maps"),
        ("/data/cache/9b2f3c5e-1234-4abc-8def-0123456789ab.json", "/data/cache/<uuid>.json"),
        ("/data/objects/3f/a9c2d1e4b5a6c7d8e9f0", "/data/objects/3f/<hex>"),
        ("/var/log/run-2024-05-01T12-30-00.log", "/var/log/run-<time>.log"),
        ("/var/log/app.1700000000123.log", "/var/log/app.<num>.log"),
        ("/data/k3j9x2q7/part", "/data/<rand>/part"),
        # ordinary names survive
        ("/usr/bin/sha256sum", "/usr/bin/sha256sum"),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        ("/usr/bin/python3.11", "/usr/bin/python3.11"),
        ("/srv/temperature_data.csv", "/srv/temperature_data.csv"),
        ("/srv/deadbeef/x", "/srv/deadbeef/x"),
        ("/srv/12345678/x", "/srv/<num>/x"),
    ],
)
def test_paths(norm: Normalizer, raw: str, expected: str) -> None:
    assert norm.path(raw) == expected


def test_longest_place_wins() -> None:
    n = Normalizer(RunPlaces(workspace=["/tmp/a/ws"], home="/tmp/a"))
    assert n.path("/tmp/a/ws/x") == "<WS>/x"
    assert n.path("/tmp/a/y") == "<HOME>/y"
    assert n.path("/tmp/b") == "<TMP>/b"


def test_second_workspace_and_outside_cwd() -> None:
    n = Normalizer(RunPlaces(workspace=["/w/one", "/w/two"], cwd="/elsewhere"))
    assert n.path("/w/two/f") == "<WS2>/f"
    assert n.path("/elsewhere/f") == "<CWD>/f"


def test_pids_of_the_run_are_folded(norm: Normalizer) -> None:
    assert norm.path("/tmp/lock.48213") == "<TMP>/lock.48213"
    fresh = Normalizer(PLACES)
    fresh.note_pid(48213)
    assert fresh.path("/tmp/lock.48213") == "<TMP>/lock.<pid>"
    assert fresh.path("/tmp/lock.482130") == "<TMP>/lock.482130"


def test_arguments_fold_places_anywhere(norm: Normalizer) -> None:
    assert norm.text(f"--out={WS}/build") == "--out=<WS>/build"
    assert norm.text("/tmp/tmpk3j_9x2a/a,/tmp/tmpq9w_8e7r/b") == "<TMP>/tmp<rand>/a,<TMP>/tmp<rand>/b"
    assert norm.text("cat /proc/4242/status") == "cat /proc/<pid>/status"
    # a longer name is not inside the workspace: only the temp dir is folded
    assert norm.text(f"{WS}x/other") == "<TMP>/pytest-of-<user>/pytest-<n>/test_x0/wsx/other"


def test_command_form(norm: Normalizer) -> None:
    cmd = norm.command("/usr/bin/python3.11", ["python3", f"{WS}/main.py", "-c", "print('a b')"])
    assert cmd == "/usr/bin/python3.11 <WS>/main.py -c \"print('a b')\""
    long = norm.command("/bin/sh", ["sh", "-c", "x" * 1000])
    assert len(long) <= NormalizeRules().max_command_chars
    assert "…#" in long
    assert long != norm.command("/bin/sh", ["sh", "-c", "x" * 999 + "y"])


def test_hosts(norm: Normalizer) -> None:
    assert norm.host("93.184.216.34", 443, "example.com", "tcp") == "example.com:443"
    assert norm.host("93.184.216.34", 443) == "93.184.216.34:443"
    assert norm.host("127.0.0.1", 51234) == "127.0.0.1:<ephemeral>"
    assert norm.host("127.0.0.1", 8080) == "127.0.0.1:8080"
    assert norm.host("2001:db8::1", 443) == "[2001:db8::1]:443"
    assert norm.host(f"{WS}/sock", None, transport="unix") == "unix:<WS>/sock"
    n = Normalizer(PLACES, NormalizeRules(fold_loopback_ephemeral_ports=False))
    assert n.host("127.0.0.1", 51234) == "127.0.0.1:51234"


@pytest.mark.parametrize(
    ("path", "op", "cls"),
    [
        ("/etc/ld.so.cache", "read", "loader"),
        ("/lib/x86_64-linux-gnu/libc.so.6", "read", "loader"),
        ("/opt/app/lib/libfoo.so", "read", "loader"),
        ("/usr/lib/locale/C.utf8/LC_CTYPE", "read", "locale"),
        ("/usr/share/locale/de/LC_MESSAGES/coreutils.mo", "read", "locale"),
        ("/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache", "read", "locale"),
        ("/usr/lib/python3.11/json/__init__.py", "read", "runtime"),
        ("/usr/lib/python3.11", "list", "runtime"),
        (f"{WS}/.venv/lib/python3.11/site-packages/six.py", "read", "runtime"),
        (f"{WS}/.venv/pyvenv.cfg", "read", "runtime"),
        (f"{WS}/pkg/__pycache__/m.cpython-311.pyc", "create", "pycache"),
        (f"{WS}/pkg/__pycache__", "mkdir", "pycache"),
        ("/usr/lib/python3.11/os.py", "write", None),  # writing a library is not noise
        ("/usr/bin/python3.11", "exec", None),
        ("/etc/passwd", "read", None),
        (f"{WS}/main.py", "read", None),
        ("/opt/skills/pdf/lib/helper.so", "read", None),  # skill files are never noise
    ],
)
def test_noise_classes(norm: Normalizer, path: str, op: str, cls: str | None) -> None:
    assert norm.noise_class(path, op) == cls


def test_ignore_paths_are_a_noise_class() -> None:
    n = Normalizer(PLACES, NormalizeRules(ignore_paths=["node_modules/**", "/var/cache/**"]))
    assert n.noise_class(f"{WS}/node_modules/x/index.js", "read") == "ignored"
    assert n.noise_class("/var/cache/apt/pkgcache.bin", "read") == "ignored"
    assert n.noise_class(f"{WS}/src/index.js", "read") is None


def test_folds_can_be_switched_off() -> None:
    n = Normalizer(PLACES, NormalizeRules(folds=("uuid",)))
    assert n.path("/tmp/tmpk3j_9x2a/x") == "<TMP>/tmpk3j_9x2a/x"
    with pytest.raises(ValueError, match="unknown fold"):
        Normalizer(PLACES, NormalizeRules(folds=("nope",)))


def test_extra_folds() -> None:
    n = Normalizer(PLACES, NormalizeRules(extra_folds=[(r"build-[0-9]+", "build-<n>")]))
    assert n.path("/srv/build-17/out") == "/srv/build-<n>/out"


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("tests/**", "<WS>/tests/test_outputs.py", True),
        ("tests/**", "<WS>/tests", True),
        ("tests/**", "<WS2>/tests/a/b.py", True),
        ("tests/**", "<WS>/src/tests/x.py", False),
        ("tests/", "<WS>/tests/x.py", True),
        ("solution/**", "<WS>/solution.py", False),
        ("/tests/**", "/tests/test_outputs.py", True),
        ("~/.ssh/*", "<HOME>/.ssh/id_rsa", True),
        ("*.key", "<WS>/a/b/server.key", True),
        ("src/*.py", "<WS>/src/a/b.py", False),
        ("src/**/*.py", "<WS>/src/a/b.py", True),
        ("src/**/*.py", "<WS>/src/b.py", True),
        ("data/file[0-9].txt", "<WS>/data/file7.txt", True),
    ],
)
def test_globs(pattern: str, path: str, hit: bool) -> None:
    assert GlobSet([pattern]).match(path) is hit


def test_glob_regex_is_anchored_per_component() -> None:
    assert glob_to_regex("a/*") == "a/[^/]*"
    assert not GlobSet([])


def test_skills_of_the_same_name_stay_apart() -> None:
    n = Normalizer(RunPlaces(skills=["/a/pdf", "/b/pdf"]))
    assert n.path("/a/pdf/SKILL.md") == "<SKILL:pdf>/SKILL.md"
    assert n.path("/b/pdf/SKILL.md") == "<SKILL:pdf#2>/SKILL.md"
