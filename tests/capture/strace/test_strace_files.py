"""File syscalls, from recorded strace output (data/files.strace, data/names.strace)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from spyglass.events.codec import field_bytes

# (type, syscall, ok/errno, fields): every row must match exactly one event of files.strace
FILES_TABLE: list[tuple[str, str, str | None, dict[str, Any]]] = [
    ("file.mkdir", "mkdir", None, {"path": "/tmp/sgfx/sub", "raw_path": "sub", "mode": "0777"}),
    ("file.create", "openat", None, {"path": "/tmp/sgfx/x", "raw_path": "x", "mode": "0666"}),
    ("file.read", "openat", None, {"path": "/tmp/sgfx/x", "raw_path": "../x"}),  # cd sub && cat ../x
    ("file.read", "openat", "ENOENT", {"path": "/tmp/sgfx/nope", "raw_path": "nope"}),  # openat(dirfd, ...)
    ("file.read", "openat", "ENOENT", {"path": "/tmp/sgfx/none/a", "raw_path": None}),
    ("file.write", "open", None, {"path": "/tmp/sgfx/x", "flags": "O_RDWR"}),
    ("file.create", "creat", None, {"path": "/tmp/sgfx/created", "mode": "0640"}),
    (
        "file.create",
        "openat2",
        None,
        {"path": "/tmp/sgfx/o2", "mode": "0600", "flags": "O_WRONLY|O_CREAT|O_EXCL"},
    ),
    ("file.write", "openat", None, {"path": "/tmp/sgfx/x", "flags": "O_WRONLY|O_APPEND|O_CLOEXEC"}),
    ("file.read", "openat", None, {"path": "/tmp/sgfx/x", "raw_path": "/proc/self/cwd/../x"}),
    ("file.rename", "rename", None, {"path": "/tmp/sgfx/created", "target": "/tmp/sgfx/renamed"}),
    (
        "file.rename",
        "renameat",
        None,
        {"path": "/tmp/sgfx/renamed", "raw_path": "renamed", "target": "/tmp/sgfx/x2"},
    ),
    (
        "file.rename",
        "renameat",
        None,
        {"path": "/tmp/sgfx/x2", "target": "/tmp/sgfx/x"},
    ),  # over an existing file
    ("file.rename", "renameat2", "EEXIST", {"path": "/tmp/sgfx/o2", "flags": "RENAME_NOREPLACE"}),
    ("file.rename", "rename", "ENOENT", {"path": "/tmp/sgfx/missing", "target": "/tmp/sgfx/y"}),
    ("file.link", "link", None, {"path": "/tmp/sgfx/hl", "target": "/tmp/sgfx/x"}),
    ("file.link", "linkat", None, {"path": "/tmp/sgfx/hl2", "raw_path": "hl2", "target": "/tmp/sgfx/x"}),
    ("file.symlink", "symlink", None, {"path": "/tmp/sgfx/sl", "target": "x"}),
    ("file.symlink", "symlink", "EEXIST", {"path": "/tmp/sgfx/sl", "target": "x"}),
    ("file.symlink", "symlinkat", None, {"path": "/tmp/sgfx/sl2", "target": "../etc/passwd"}),
    ("file.chmod", "chmod", None, {"path": "/tmp/sgfx/x", "mode": "0755"}),
    ("file.chmod", "chmod", "ENOENT", {"path": "/tmp/sgfx/missing", "mode": "0600"}),
    ("file.chmod", "fchmod", None, {"path": "/tmp/sgfx/x", "mode": "0644"}),
    ("file.chmod", "fchmodat", None, {"path": "/tmp/sgfx/hl", "raw_path": "hl", "mode": "04755"}),
    ("file.chown", "chown", None, {"path": "/tmp/sgfx/x", "owner": 1000, "group": 1000}),
    ("file.chown", "fchown", None, {"path": "/tmp/sgfx/x", "owner": 0, "group": None}),
    ("file.chown", "lchown", None, {"path": "/tmp/sgfx/sl", "owner": 1000, "group": None}),
    ("file.chown", "fchownat", None, {"path": "/tmp/sgfx/hl2", "owner": None, "group": 1000}),
    ("file.mkdir", "mkdir", None, {"path": "/tmp/sgfx/d1", "mode": "0700"}),
    ("file.mkdir", "mkdir", "EEXIST", {"path": "/tmp/sgfx/d1"}),
    ("file.mkdir", "mkdirat", None, {"path": "/tmp/sgfx/d2", "raw_path": "d2", "mode": "0777"}),
    ("file.truncate", "truncate", None, {"path": "/tmp/sgfx/hl"}),
    ("file.truncate", "ftruncate", None, {"path": "/tmp/sgfx/hl2"}),
    ("file.delete", "rmdir", None, {"path": "/tmp/sgfx/d1"}),
    ("file.delete", "unlinkat", None, {"path": "/tmp/sgfx/d2", "flags": "AT_REMOVEDIR"}),
    ("file.delete", "unlinkat", None, {"path": "/tmp/sgfx/hl2", "flags": None}),
    ("file.delete", "unlink", "ENOENT", {"path": "/tmp/sgfx/missing"}),
    ("file.delete", "unlink", None, {"path": "/tmp/sgfx/sub/y", "raw_path": "sub/y"}),  # after fchdir
    ("file.delete", "rmdir", None, {"path": "/tmp/sgfx/sub", "raw_path": "sub"}),
]


@pytest.mark.parametrize(("type_", "syscall", "errno", "fields"), FILES_TABLE)
def test_file_syscall_table(
    parse, one, type_: str, syscall: str, errno: str | None, fields: dict[str, Any]
) -> None:
    events, parser = parse("files")
    ev = one(events, type=type_, syscall=syscall, errno=errno, **fields)
    assert ev.ok is (errno is None)
    assert ev.pid == parser.root_pid and ev.ts > 1_600_000_000 * 10**9
    assert parser.unparsed == 0


def test_o_path_opens_are_not_events(parse, pick) -> None:
    events, _ = parse("files")
    assert not pick(events, flags=lambda f: f is not None and "O_PATH" in f)


def test_proc_self_fd_maps_to_the_file(parse, pick) -> None:
    events, _ = parse("files")
    (ev,) = pick(events, raw_path=lambda r: r is not None and r.startswith("/proc/self/fd/"))
    assert ev.path == "/tmp/sgfx/x" and ev.type == "file.read"


def test_non_utf8_names_round_trip_to_exact_bytes(parse, one) -> None:
    events, _ = parse("files")
    created = one(events, type="file.create", path=lambda p: p.startswith("/tmp/sgfx/caf"))
    assert created.path == "/tmp/sgfx/café-\\xff\\xfe.bin"
    assert field_bytes(created, "file.path") == b"/tmp/sgfx/caf\xc3\xa9-\xff\xfe.bin"
    renamed = one(events, type="file.rename", path=created.path)
    assert field_bytes(renamed, "file.target") == b'/tmp/sgfx/\xe9t\xe9 "q"\\n.txt'
    assert renamed.raw_bytes is not None
    assert base64.b64decode(renamed.raw_bytes["file.path"]) == b"/tmp/sgfx/caf\xc3\xa9-\xff\xfe.bin"
    deleted = one(events, type="file.delete", path=renamed.target)
    assert field_bytes(deleted, "file.path") == b'/tmp/sgfx/\xe9t\xe9 "q"\\n.txt'


def test_every_file_event_has_an_absolute_normalized_path(parse, pick) -> None:
    events, _ = parse("files")
    file_events = pick(events, type=lambda t: t.startswith("file."))
    assert len(file_events) > 40
    for ev in file_events:
        assert ev.path.startswith("/") and "/../" not in ev.path and "/./" not in ev.path, ev


def test_awkward_names_survive_strace_quoting(parse, pick, one) -> None:
    events, parser = parse("names")
    created = {ev.path for ev in pick(events, type="file.create", path=lambda p: p.startswith("/tmp/sgfx/"))}
    assert created == {
        "/tmp/sgfx/a>b",
        "/tmp/sgfx/a) = 5",
        '/tmp/sgfx/q"uote',
        "/tmp/sgfx/nl\nx",
        "/tmp/sgfx/back\\slash",
        "/tmp/sgfx/lt<gt>",
        "/tmp/sgfx/\x7f",
        "/tmp/sgfx/a,b",
    }
    renames = pick(events, type="file.rename")
    assert {(ev.path + "2") for ev in renames} == {ev.target for ev in renames}
    assert one(events, type="net.listen").address == "/tmp/sgfx/so>ck"
    assert parser.unparsed == 0
