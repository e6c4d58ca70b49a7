"""Process life from strace output: fork/vfork/clone, threads, exec, exit, ordering quirks."""

from __future__ import annotations

from collections import Counter

CLONE_THREAD = (
    "clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS"
    "|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7f1, parent_tid=0x7f1, exit_signal=0, "
    "stack=0x7f0, stack_size=0x7fff80, tls=0x7f2}"
)
FORK = "clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f3"


def test_every_process_starts_once_and_exits_once(parse, pick) -> None:
    events, parser = parse("procs")
    starts = Counter(ev.pid for ev in pick(events, type="process.start"))
    exits = Counter(ev.pid for ev in pick(events, type="process.exit"))
    assert starts and set(starts.values()) == {1}
    assert starts == exits
    assert parser.root_pid == events[0].pid and events[0].type == "process.start"
    assert parser.root_exited and parser.root_exit_code == 0
    assert parser.live() == [] and parser.unparsed == 0


def test_threads_are_not_processes(parse, pick) -> None:
    events, parser = parse("procs")
    reads = pick(events, type="file.read", path="/etc/hostname")
    assert len(reads) == 3
    tids = {ev.tid for ev in reads}
    assert len(tids) == 3 and None not in tids
    assert {ev.pid for ev in reads} == {parser.root_pid}
    started = {ev.pid for ev in pick(events, type="process.start")}
    assert not tids & started
    assert not tids & {ev.pid for ev in pick(events, type="process.exit")}


def test_vfork_child_and_path_search(parse, pick, one) -> None:
    events, parser = parse("procs")
    sh = one(events, type="process.exec", ok=True, argv=["sh", "-c", "exit 3"])
    assert sh.exe == "/usr/bin/sh" and sh.cwd == "/tmp/sgfx" and sh.uid == 0
    start = one(events, type="process.start", pid=sh.pid)
    assert start.ppid == parser.root_pid and start.syscall == "vfork" and start.cwd == "/tmp/sgfx"
    failed = pick(events, type="process.exec", pid=sh.pid, ok=False)
    assert failed and {ev.errno for ev in failed} == {"ENOENT"}
    assert all(ev.exe.endswith("/sh") and ev.exe.startswith("/") for ev in failed)
    assert events.index(start) < events.index(failed[0]) < events.index(sh)
    assert one(events, type="process.exit", pid=sh.pid).exit_code == 3


def test_program_not_found_is_a_series_of_failed_execs(parse, pick) -> None:
    events, _ = parse("procs")
    tries = pick(events, type="process.exec", argv=["no-such-program-xyz"])
    assert len(tries) > 3 and not any(ev.ok for ev in tries)
    assert all(ev.errno == "ENOENT" for ev in tries)


def test_exec_resolves_relative_program_against_cwd(parse, one) -> None:
    events, _ = parse("procs")
    ev = one(events, type="process.exec", argv=["true", "relative"])
    assert ev.exe == "/usr/bin/true" and ev.cwd == "/usr" and ev.ok


def test_execveat_by_fd(parse, one) -> None:
    events, _ = parse("procs")
    ev = one(events, type="process.exec", syscall="execveat")
    assert ev.exe == "/usr/bin/true" and ev.argv == ["true", "via-fd"] and ev.ok


def test_exec_from_a_thread_continues_as_the_leader(parse, pick, one) -> None:
    events, _ = parse("procs")
    ev = one(events, type="process.exec", argv=["true", "from-thread"])
    assert ev.ok and ev.tid is None
    assert one(events, type="process.start", pid=ev.pid).ppid is not None
    assert one(events, type="process.exit", pid=ev.pid).exit_code == 0


def test_killed_and_core_dumped(parse, one) -> None:
    events, _ = parse("procs")
    victim = one(events, type="process.exec", ok=True, argv=["sh", "-c", "kill -9 $$"])
    ev = one(events, type="process.exit", pid=victim.pid)
    assert ev.signal == "SIGKILL" and ev.exit_code is None
    events, parser = parse("abort")
    ev = one(events, type="process.exit")
    assert ev.signal == "SIGABRT" and ev.detail == "core dumped"
    assert parser.root_signal == "SIGABRT" and parser.root_exit_code is None


def test_grandchild_of_a_shell_and_cwd_tracking(parse, one) -> None:
    events, _ = parse("procs")
    late = one(events, type="file.create", path="/tmp/sgfx/late")
    shell = one(events, type="process.exec", ok=True, argv=lambda a: a[-1].startswith("(sleep 0.2"))
    assert one(events, type="process.start", pid=late.pid).ppid == shell.pid
    cat = one(events, type="process.exec", ok=True, argv=["cat", "sgfx/late"])
    assert cat.cwd == "/tmp"
    read = one(events, type="file.read", pid=cat.pid, path="/tmp/sgfx/late")
    assert read.raw_path == "sgfx/late"


def test_pid_namespace_pids_are_translated(parse, pick, one) -> None:
    events, _ = parse("pidns")
    sleep = one(events, type="process.exec", ok=True, argv=["sleep", "0.1"])
    shell = one(events, type="process.exec", ok=True, argv=lambda a: a[0] == "sh")
    assert one(events, type="process.start", pid=sleep.pid).ppid == shell.pid
    assert sleep.pid > 100  # strace's view, not the "2" the namespace sees
    assert not pick(events, syscall="kill")  # kill(1 /* <shell> in strace's PID NS */) is in the tree
    assert one(events, type="sys.sensitive", syscall="unshare").detail == "CLONE_NEWNS|CLONE_NEWPID"


def test_child_seen_before_its_fork_returns(parse, pick, one) -> None:
    lines = [
        '100 1700000000.000001 execve("/bin/sh", ["sh"], 0x1 /* 3 vars */) = 0',
        f"100 1700000000.000002 {FORK} <unfinished ...>",
        '101 1700000000.000003 openat(AT_FDCWD</w>, "early", O_RDONLY) = -1 ENOENT (No such file)',
        "100 1700000000.000004 <... clone resumed>) = 101",
        '101 1700000000.000005 execve("/bin/true", ["true"], 0x2 /* 3 vars */) = 0',
        "101 1700000000.000006 +++ exited with 0 +++",
        "100 1700000000.000007 +++ exited with 0 +++",
    ]
    events, parser = parse(lines=lines, cwd="/w")
    start = one(events, type="process.start", pid=101)
    assert start.ppid == 100 and start.syscall == "clone" and start.ts == 1_700_000_000_000_003_000
    assert events.index(start) < events.index(one(events, type="file.read", pid=101))
    assert one(events, type="file.read").path == "/w/early"
    assert [ev.pid for ev in pick(events, type="process.exit")] == [101, 100]
    assert parser.unparsed == 0


def test_thread_seen_before_clone3_returns(parse, pick, one) -> None:
    lines = [
        f"200 1700000000.000001 {CLONE_THREAD} <unfinished ...>",
        '201 1700000000.000002 openat(AT_FDCWD</w>, "/etc/passwd", O_RDONLY) = 3</etc/passwd>',
        "200 1700000000.000003 <... clone3 resumed> => {parent_tid=[201]}, 88) = 201",
        "201 1700000000.000004 connect(4<TCP:[9]>, {sa_family=AF_INET, sin_port=htons(443), "
        'sin_addr=inet_addr("10.0.0.1")}, 16 <unfinished ...>',
        "201 1700000000.000005 +++ exited with 0 +++",
        "200 1700000000.000006 +++ exited with 0 +++",
    ]
    events, parser = parse(lines=lines)
    assert [ev.pid for ev in pick(events, type="process.start")] == [200]
    read = one(events, type="file.read")
    assert read.pid == 200 and read.tid == 201
    cut = one(events, type="net.connect")  # the thread died inside connect(): reported, not ok
    assert cut.ok is False and cut.detail == "unfinished" and cut.tid == 201 and cut.address == "10.0.0.1"
    assert [ev.pid for ev in pick(events, type="process.exit")] == [200]
    assert parser.live() == []


def test_thread_clone_returning_first(parse, pick) -> None:
    lines = [
        f"300 1700000000.000001 {CLONE_THREAD} => {{parent_tid=[301]}}, 88) = 301",
        '301 1700000000.000002 chdir("/srv") = 0',
        '300 1700000000.000003 unlink("x") = 0',
        "301 1700000000.000004 +++ exited with 0 +++",
    ]
    events, parser = parse(lines=lines)
    assert not pick(events, type="process.start", pid=301)
    assert pick(events, type="file.delete")[0].path == "/srv/x"  # cwd is per process
    assert parser.live_tids() == [300]


def test_chdir_and_fchdir_move_the_cwd(parse, pick) -> None:
    lines = [
        '1 1700000000.000001 chdir("/a/b") = 0',
        '1 1700000000.000002 unlink("c") = 0',
        '1 1700000000.000003 chdir("../d/./e") = 0',
        '1 1700000000.000004 unlink("f") = 0',
        '1 1700000000.000005 chdir("/nope") = -1 ENOENT (No such file or directory)',
        '1 1700000000.000006 unlink("g") = 0',
        "1 1700000000.000007 fchdir(3</srv/x>) = 0",
        '1 1700000000.000008 unlink("h") = 0',
        f"1 1700000000.000009 {FORK}) = 2",
        '2 1700000000.000010 chdir("/child") = 0',
        '1 1700000000.000011 unlink("i") = 0',
        '2 1700000000.000012 unlink("j") = 0',
    ]
    events, _ = parse(lines=lines)
    paths = [ev.path for ev in pick(events, type="file.delete")]
    assert paths == ["/a/b/c", "/a/d/e/f", "/a/d/e/g", "/srv/x/h", "/srv/x/i", "/child/j"]
    assert pick(events, type="process.start", pid=2)[0].cwd == "/srv/x"


def test_only_leaders_report_exits(parse, pick) -> None:
    lines = [
        f"400 1700000000.000001 {CLONE_THREAD} => {{parent_tid=[401]}}, 88) = 401",
        "401 1700000000.000002 +++ killed by SIGKILL +++",
        "400 1700000000.000003 +++ killed by SIGKILL +++",
    ]
    events, parser = parse(lines=lines)
    (ev,) = pick(events, type="process.exit")
    assert ev.pid == 400 and ev.signal == "SIGKILL"
    assert parser.root_signal == "SIGKILL"


def test_unfinished_and_resumed_calls_are_stitched_per_thread(parse, one) -> None:
    lines = [
        '10 1700000000.000001 openat(AT_FDCWD</w>, "a", O_RDONLY <unfinished ...>',
        f"10 1700000000.000002 {FORK} <unfinished ...>",  # not possible for one thread: replaces the openat
        "10 1700000000.000003 <... clone resumed>) = 11",
        '11 1700000000.000004 rename("x", <unfinished ...>',
        '10 1700000000.000005 unlink("/w/a) = 0" <unfinished ...>',
        '11 1700000000.000006 <... rename resumed>"y") = -1 ENOENT (No such file or directory)',
        "10 1700000000.000007 <... unlink resumed>) = 0",
        "10 1700000000.000008 <... openat resumed>) = 3</w/a>",  # no pending openat any more: ignored
    ]
    events, parser = parse(lines=lines, cwd="/w")
    ren = one(events, type="file.rename")
    assert (ren.pid, ren.path, ren.target, ren.errno, ren.ts) == (
        11,
        "/w/x",
        "/w/y",
        "ENOENT",
        1_700_000_000_000_006_000,
    )
    assert one(events, type="file.delete").path == "/w/a) = 0"
    assert parser.unparsed == 0


def test_signal_to_the_init_of_a_sandbox_namespace_is_reported_although_traced(parse) -> None:
    """Inside a sandbox, pid 1 is spyglass's relay (traced): a signal to it is reported with its host
    pid; the init signalling itself (the pidns capture above) stays the run's own business."""
    lines = [
        '100 1700000000.000001 execve("/bin/sh", ["sh"], 0x1 /* 3 vars */) = 0',
        f"100 1700000000.000002 {FORK}) = 101",
        '101 1700000000.000003 execve("/bin/sh", ["sh", "-c", "kill -STOP 1"], 0x1 /* 3 vars */) = 0',
        "101 1700000000.000004 kill(1 /* 100 in strace's PID NS */, SIGSTOP) = 0",
        "100 1700000000.000005 kill(1 /* 100 in strace's PID NS */, SIGTERM) = 0",
        "101 1700000000.000006 kill(2 /* 101 in strace's PID NS */, SIGTERM) = 0",
    ]
    events, _ = parse(lines=lines)
    kills = [e for e in events if e.syscall == "kill"]
    assert [(e.pid, e.target_pid, e.detail) for e in kills] == [(101, 100, "SIGSTOP")]
