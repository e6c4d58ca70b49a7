"""Other processes and files reached sideways (pidfds, process memory, file handles, TIOCSTI),
and the descriptor table kept right by dup/close (recorded fixture: data/access.strace)."""

from __future__ import annotations


def test_file_handle_open_resolves_to_the_file_it_was_made_from(parse, one) -> None:
    events, _ = parse("access")
    made = one(events, syscall="name_to_handle_at")
    assert made.type == "sys.sensitive" and made.path == "/tmp/sgfx/secret"
    opened = one(events, syscall="open_by_handle_at")
    assert opened.type == "file.read" and opened.path == "/tmp/sgfx/secret" and opened.ok


def test_unknown_handle_is_reported_not_dropped(parse, one) -> None:
    line = (
        "9 1700000000.000001 open_by_handle_at(3</tmp>, {handle_bytes=8, handle_type=1, "
        'f_handle="\\x01\\x02"}, O_RDWR) = 4'
    )
    events, _ = parse(lines=[line])
    ev = one(events, syscall="open_by_handle_at")
    assert ev.type == "sys.sensitive" and "file unknown" in (ev.detail or "")
    events, _ = parse(lines=[line], fd_link=lambda pid, fd: "/home/u/.ssh/id_rsa" if fd == 4 else None)
    ev = one(events, syscall="open_by_handle_at")
    assert ev.type == "file.write" and ev.path == "/home/u/.ssh/id_rsa"


def test_pidfd_and_process_memory_name_their_target(parse, one, pick) -> None:
    events, parser = parse("access")
    foreign = one(events, syscall="pidfd_open").target_pid
    assert foreign is not None and foreign not in parser.state.seen
    assert one(events, syscall="pidfd_send_signal").target_pid == foreign
    steal = one(events, syscall="pidfd_getfd")
    assert steal.target_pid == foreign and "pipe:" in (steal.detail or "")
    for name in ("process_vm_readv", "process_vm_writev"):
        ev = one(events, syscall=name)
        assert ev.type == "sys.sensitive" and ev.target_pid == foreign and ev.ok is False


def test_tiocsti_is_reported_and_other_ioctls_are_not(parse, one, pick) -> None:
    events, _ = parse("access")
    ev = one(events, syscall="ioctl")
    assert ev.detail is not None and ev.detail.startswith("TIOCSTI") and (ev.path or "").startswith("/dev/pts/")


def test_signals_to_a_process_group_name_the_group(parse, pick) -> None:
    events, _ = parse("access", pgid_of=lambda pid: 4242)
    groups = [ev for ev in pick(events, syscall="kill") if "process group" in (ev.detail or "")]
    assert len(groups) == 2
    assert groups[1].target_pid == -4242 and groups[1].detail == "signal 0 to process group 4242"
    assert groups[0].target_pid is not None and groups[0].target_pid < -1


def test_dup_and_o_path_descriptors_resolve_proc_fd_paths(parse, one, pick) -> None:
    events, parser = parse("access")
    # /proc/self/fd/60/secret: fd 60 is an F_DUPFD copy of an O_PATH descriptor on /tmp/sgfx
    reads = pick(events, type="file.read", path="/tmp/sgfx/secret")
    assert any(ev.raw_path == "/proc/self/fd/60/secret" for ev in reads)
    fds = parser.state.procs.get(parser.root_pid)
    assert fds is None or 4 not in fds.fds  # closed


def test_close_and_dup2_over_drop_stale_paths(parse, pick) -> None:
    lines = [
        '5 1700000000.000001 openat(AT_FDCWD</w>, "/w/d", O_RDONLY|O_PATH) = 3</w/d>',
        "5 1700000000.000002 dup2(4<pipe:[1]>, 3</w/d>) = 3<pipe:[1]>",
        '5 1700000000.000003 openat(AT_FDCWD</w>, "/proc/self/fd/3", O_RDONLY) = -1 ENXIO (No such device)',
        '5 1700000000.000004 openat(AT_FDCWD</w>, "/w/e", O_RDONLY|O_PATH) = 6</w/e>',
        "5 1700000000.000005 close(6</w/e>) = 0",
        '5 1700000000.000006 openat(AT_FDCWD</w>, "/proc/self/fd/6/x", O_RDONLY) = -1 ENOENT (No such file)',
    ]
    events, _ = parse(lines=lines)
    paths = [ev.path for ev in pick(events, type="file.read")]
    assert paths[0] != "/w/d"  # the pipe, never the directory the fd used to name
    assert paths[1] != "/w/e/x"


def test_clone_untraced_child_is_reported(parse, one) -> None:
    lines = [
        "5 1700000000.000001 clone(child_stack=NULL, flags=CLONE_UNTRACED|SIGCHLD) = 77",
    ]
    events, parser = parse(lines=lines)
    ev = one(events, type="sys.sensitive")
    assert ev.target_pid == 77 and (ev.detail or "").startswith("CLONE_UNTRACED")
    assert parser.state.untraced == {77}
    plain, _ = parse(lines=["5 1700000000.000001 clone(child_stack=NULL, flags=SIGCHLD) = 77"])
    assert [e.type for e in plain] == ["process.start", "process.start"]


def test_live_descriptor_link_beats_a_stale_table_entry(parse, pick) -> None:
    """Without dup/close tracing an fd may be reused unseen: the process's own link decides."""
    lines = [
        '5 1700000000.000001 openat(AT_FDCWD</w>, "/w/d", O_RDONLY|O_DIRECTORY) = 3</w/d>',
        '5 1700000000.000002 openat(AT_FDCWD</w>, "/proc/self/fd/3/x", O_RDONLY) = -1 ENOENT (No such file)',
    ]
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "/w/other" if fd == 3 else None)
    assert pick(events, type="file.read")[-1].path == "/w/other/x"
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "pipe:[9]" if fd == 3 else None)
    assert pick(events, type="file.read")[-1].path == "/proc/5/fd/3/x"
    events, _ = parse(lines=lines)  # no live process to ask: the last path seen
    assert pick(events, type="file.read")[-1].path == "/w/d/x"


def test_exec_of_a_close_on_exec_memory_file_is_named_from_the_trace_not_the_live_descriptor(parse, one) -> None:
    """The exec is over when strace reports it: a close-on-exec memory file's descriptor is gone and
    the new program's loader has reused its number (read live, it named /etc/ld.so.cache and the
    memory-file exec rule stayed silent).  The live link stands in for that race here; the real
    process is tests/capture/strace/test_strace_backend.py."""
    lines = [
        '9 1700000000.000001 memfd_create("x", MFD_CLOEXEC) = 3',
        '9 1700000000.000002 execve("/proc/self/fd/3", ["x"], 0x7ffd0000 /* 1 vars */) = 0',
    ]
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "/etc/ld.so.cache" if fd == 3 else None)
    assert one(events, type="process.exec").exe == "/memfd:x (deleted)"


def test_benign_twin_exec_of_an_opened_program_through_its_descriptor_names_it(parse, one) -> None:
    lines = [
        '9 1700000000.000001 openat(AT_FDCWD, "/usr/bin/true", O_RDONLY|O_CLOEXEC) = 3</usr/bin/true>',
        '9 1700000000.000002 execve("/dev/fd/3", ["true"], 0x7ffd0000 /* 1 vars */) = 0',
    ]
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "/etc/ld.so.cache" if fd == 3 else None)
    assert one(events, type="process.exec").exe == "/usr/bin/true"


def test_a_memory_file_put_unseen_behind_an_opened_programs_number_is_named_as_what_runs(parse, one) -> None:
    """The attacker opens a trusted program (traced), then closes that descriptor and dups a memory
    file onto its number (neither call is traced) and execs /proc/self/fd/N: the table still names
    the trusted program, the image the process runs does not (its /proc/PID/exe, read through the
    host callback; the real process is in test_strace_backend.py)."""
    lines = [
        '9 1700000000.000001 openat(AT_FDCWD, "/usr/bin/git", O_RDONLY) = 3</usr/bin/git>',
        '9 1700000000.000002 memfd_create("payload", 0) = 4</memfd:payload>(deleted)',
        '9 1700000000.000003 execve("/proc/self/fd/3", ["payload"], 0x7ffd0000 /* 1 vars */) = 0',
    ]
    runs = {-1: "/memfd:payload (deleted)", 3: "/memfd:payload (deleted)"}
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: runs.get(fd))
    assert one(events, type="process.exec").exe == "/memfd:payload (deleted)"


def test_a_memory_file_exec_followed_at_once_by_another_exec_is_still_named(parse, one) -> None:
    """The attacker execs the memory file and, from it, a trusted program at once, before the line
    is parsed: the process runs the trusted program by then, the trace named the memory file."""
    lines = [
        '9 1700000000.000001 memfd_create("evil", MFD_CLOEXEC) = 3</memfd:evil>(deleted)',
        '9 1700000000.000002 execve("/proc/self/fd/3", ["evil"], 0x7ffd0000 /* 1 vars */) = 0',
    ]
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "/usr/bin/true" if fd == -1 else None)
    assert one(events, type="process.exec").exe == "/memfd:evil (deleted)"


def test_two_witnesses_that_disagree_name_the_descriptor_itself(parse, one) -> None:
    """The trace saw /usr/bin/git behind the number, the process runs /tmp/evil (dup'ed over it
    unseen, or a later exec): neither is believed; the exec is reported through its descriptor,
    which evasion-memfd-exec names. (A #! script run through a descriptor, whose image is its
    interpreter, is reported so too.)"""
    lines = [
        '9 1700000000.000001 openat(AT_FDCWD, "/usr/bin/git", O_RDONLY) = 3</usr/bin/git>',
        '9 1700000000.000002 execve("/proc/self/fd/3", ["git"], 0x7ffd0000 /* 1 vars */) = 0',
    ]
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "/tmp/evil" if fd == -1 else None)
    assert one(events, type="process.exec").exe == "/proc/self/fd/3"
    # benign twin: the two agree
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "/usr/bin/git" if fd == -1 else None)
    assert one(events, type="process.exec").exe == "/usr/bin/git"


def test_an_exec_through_a_descriptor_keeps_the_descriptor_path_and_alerts(parse, one) -> None:
    """Whatever the descriptor was taken to be (here the trace's stale /usr/bin/python3.11, which a
    #! script's interpreter image agrees with, or the process already gone), the exec keeps its
    descriptor path and evasion-memfd-exec alerts on it; the benign twin, a plain exec, does not."""
    from spyglass.events import Event
    from spyglass.rules.replay import evaluate
    from spyglass.rules.ruleset import load_ruleset

    lines = [
        '9 1700000000.000001 openat(AT_FDCWD, "/usr/bin/python3", O_RDONLY) = 3</usr/bin/python3.11>',
        '9 1700000000.000002 execve("/proc/self/fd/3", ["python3"], 0x7ffd0000 /* 1 vars */) = 0',
        '10 1700000000.000003 execve("/usr/bin/python3.11", ["python3"], 0x7ffd0000 /* 1 vars */) = 0',
    ]
    events, _ = parse(lines=lines, fd_link=lambda pid, fd: "/usr/bin/python3.11" if fd == -1 else None)
    through, plain = [e for e in events if e.type == "process.exec"]
    assert through.exe == "/usr/bin/python3.11" and through.raw_path == "/proc/self/fd/3"
    assert plain.raw_path is None
    starts = [Event(type="process.start", pid=9, ts=1), Event(type="process.start", pid=10, ts=1)]
    fired = evaluate([*starts, through, plain], load_ruleset(), renumber=True, cwd="/w", home="/home/u")
    assert [a.pid for a in fired if a.rule_id == "evasion-memfd-exec"] == [9]
