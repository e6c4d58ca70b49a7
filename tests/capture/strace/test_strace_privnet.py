"""Privilege, sensitive and network syscalls from recorded strace output."""

from __future__ import annotations

import pytest

KILLS = ("kill", "tkill", "tgkill")


def _foreign_pid(events, one) -> int:
    """priv.py is run with the pid of a process outside the traced tree as its last argument."""
    return int(one(events, type="process.exec", ok=True).argv[-1])


def test_set_id_calls_track_the_ids(parse, pick, one) -> None:
    events, _ = parse("priv")
    changes = pick(events, type="priv.change", syscall=lambda s: s != "capset")
    by_call = {ev.detail: ev for ev in changes}
    assert (by_call["setresgid(1000, 1000, 1000)"].gid, by_call["setresgid(1000, 1000, 1000)"].uid) == (
        1000,
        0,
    )
    assert by_call["setuid(1000)"].uid == 1000 and by_call["setuid(1000)"].ruid == 1000
    assert by_call["fsuid=1000"].syscall == "setfsuid" and by_call["fsgid=1000"].syscall == "setfsgid"
    failed = by_call["setuid(0)"]
    assert failed.ok is False and failed.errno == "EPERM" and failed.uid == 1000
    assert {ev.syscall for ev in changes} >= {
        "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
    }  # fmt: skip
    shadow = one(events, type="file.read", path="/etc/shadow")
    assert shadow.errno == "EACCES"


def test_capset_is_a_privilege_change(parse, pick) -> None:
    events, _ = parse("priv")
    caps = pick(events, type="priv.change", syscall="capset")
    assert len(caps) == 2
    assert all(ev.detail.startswith("capset effective=1<<CAP_CHOWN") for ev in caps)
    assert "CAP_SYS_ADMIN" not in caps[0].detail.split("permitted=")[0]
    assert "CAP_SYS_ADMIN" in caps[1].detail.split("permitted=")[0]


@pytest.mark.parametrize(
    ("syscall", "detail", "errno"),
    [
        ("memfd_create", "memfd:payload", None),
        ("io_uring_setup", "io_uring_setup entries=4", None),
        ("bpf", "BPF_PROG_LOAD", "E2BIG"),
        ("init_module", "init_module", "ENOSYS"),
        ("finit_module", "finit_module /dev/null", "ENOSYS"),
        ("unshare", "CLONE_NEWNS|CLONE_NEWNET", None),
        ("umount2", "umount /mnt MNT_DETACH", None),
    ],
)
def test_sensitive_calls(parse, one, syscall: str, detail: str, errno: str | None) -> None:
    events, _ = parse("priv")
    ev = one(events, type="sys.sensitive", syscall=syscall)
    assert (ev.detail, ev.errno, ev.ok) == (detail, errno, errno is None)


def test_mount_setns_and_ptrace(parse, pick, one) -> None:
    events, _ = parse("priv")
    mounts = pick(events, type="sys.sensitive", syscall="mount")
    assert [ev.detail for ev in mounts] == [
        "mount none on / MS_REC|MS_PRIVATE",
        "mount tmpfs on /mnt type tmpfs",
    ]
    assert mounts[1].path == "/mnt"
    assert one(events, syscall="setns").detail.startswith("CLONE_NEWNET net:[")
    foreign = _foreign_pid(events, one)
    attach = pick(events, type="sys.sensitive", syscall="ptrace")
    assert [ev.detail for ev in attach] == ["PTRACE_ATTACH", "PTRACE_ATTACH"]
    assert attach[0].errno == "EPERM" and attach[1].target_pid == foreign


def test_kill_only_reported_outside_the_tree(parse, pick, one) -> None:
    events, _ = parse("priv")
    foreign = _foreign_pid(events, one)
    kills = pick(events, type="sys.sensitive", syscall=lambda s: s in KILLS)
    group = [ev for ev in kills if "process group" in (ev.detail or "")]
    assert [ev.detail for ev in group] == ["signal 0 to its own process group"]  # kill(0, 0)
    kills = [ev for ev in kills if ev not in group]
    assert sorted(ev.syscall for ev in kills) == ["kill", "tgkill", "tkill"]
    assert {ev.target_pid for ev in kills} == {foreign}
    assert {ev.detail for ev in kills} == {"signal 0"}


def test_signals_named(parse, one) -> None:
    lines = [
        "1 1700000000.000001 kill(4242, SIGTERM) = 0",
        "1 1700000000.000002 kill(-1, SIGKILL) = -1 EPERM (Operation not permitted)",
        "1 1700000000.000003 kill(-77, SIGKILL) = 0",
        "1 1700000000.000004 kill(0, SIGHUP) = 0",
    ]
    events, _ = parse(lines=lines)
    assert one(events, target_pid=4242).detail == "SIGTERM"
    assert one(events, target_pid=-1).errno == "EPERM"
    assert one(events, target_pid=-77).detail == "SIGKILL to process group 77"
    assert one(events, detail="SIGHUP to its own process group").target_pid is None
    assert len(events) == 5  # process.start of the root and the four above


def test_dns_answers_name_later_connections(parse, pick, one) -> None:
    events, _ = parse("net")
    dns = pick(events, type="net.dns")
    assert [(ev.syscall, ev.dns_name, ev.dns_answers) for ev in dns] == [
        ("recvfrom", "api.example.test", ["edge.api.example.test", "127.0.0.1"]),
        ("recvmsg", "api.example.test", []),
    ]
    tcp = pick(events, type="net.connect", transport="tcp", net_type="ipv4", ok=True)
    assert tcp and all(ev.domain == "api.example.test" for ev in tcp)
    sends = pick(events, type="net.send", syscall="sendto", transport="tcp")
    assert sends[0].nbytes == 18 and sends[0].domain == "api.example.test"


def test_connect_variants(parse, pick, one) -> None:
    events, _ = parse("net")
    inprogress = one(events, type="net.connect", errno="EINPROGRESS")
    assert inprogress.ok is True
    refused = one(events, type="net.connect", port=1)
    assert (refused.ok, refused.errno, refused.transport) == (False, "ECONNREFUSED", "tcp")
    v6 = one(events, type="net.connect", address="::1")
    assert (v6.net_type, v6.transport, v6.ok) == ("ipv6", "tcp", True)
    unix = one(events, type="net.connect", address="/tmp/sgfx/sock")
    assert (unix.transport, unix.net_type, unix.port) == ("unix", "unix", None)
    abstract = one(events, type="net.connect", address="@spyglass-abstract")
    assert abstract.errno == "ECONNREFUSED"


def test_bind_listen_send(parse, pick, one) -> None:
    events, _ = parse("net")
    listens = pick(events, type="net.listen")
    assert [(ev.transport, ev.net_type) for ev in listens] == [
        ("tcp", "ipv4"),
        ("tcp", "ipv6"),
        ("unix", "unix"),
    ]
    assert listens[0].address == "127.0.0.1" and listens[0].port > 1024
    assert listens[1].address == "::1" and listens[2].address == "/tmp/sgfx/sock"
    tcp_connect = pick(events, type="net.connect", transport="tcp", ok=True)[0]
    assert tcp_connect.port == listens[0].port
    assert one(events, type="net.bind", transport="unix").address == "/tmp/sgfx/sock"
    ping = one(events, type="net.send", port=9, net_type="ipv4")
    assert (ping.nbytes, ping.transport, ping.address) == (4, "udp", "127.0.0.1")
    assert one(events, type="net.send", port=9, net_type="ipv6").address == "::1"
    unix_send = one(events, type="net.send", transport="unix")
    assert unix_send.address == "/tmp/sgfx/sock" and unix_send.nbytes == 5
    connected_udp = one(events, type="net.send", syscall="sendmsg")
    assert connected_udp.port == one(events, type="net.connect", transport="udp").port
    server_thread = pick(events, type="net.send", tid=lambda t: t is not None)
    assert len(server_thread) == 2


def test_glibc_resolver_and_hosts_file(parse, pick, one) -> None:
    calls: list[tuple[int, str]] = []

    def hosts(pid: int, path: str) -> dict[str, str]:
        calls.append((pid, path))
        return {"10.9.9.9": "fromhosts.spyglass.test", "10.1.2.3": "loses-to-dns.test"}

    events, parser = parse("resolver", hosts_file=hosts)
    assert calls and {c[1] for c in calls} == {"/etc/hosts"} and calls[0][0] == parser.root_pid
    query = one(events, type="net.send", syscall="sendmmsg")
    assert (query.address, query.port, query.nbytes) == ("127.0.0.53", 53, 72)
    assert [ev.dns_answers for ev in pick(events, type="net.dns")] == [["10.1.2.3"], ["fd00::1"]]
    assert one(events, type="net.connect", address="10.1.2.3").domain == "real.spyglass.test"
    assert one(events, type="net.connect", address="fd00::1").domain == "real.spyglass.test"
    assert one(events, type="net.connect", address="10.9.9.9").domain == "fromhosts.spyglass.test"
    assert not pick(events, type="net.send", syscall="sendto")  # netlink chatter is not traffic
    nscd = pick(events, type="net.connect", address="/var/run/nscd/socket")
    assert len(nscd) == 2 and all(ev.errno == "ENOENT" for ev in nscd)


def test_dns_parse_only_on_udp(parse, pick) -> None:
    answer = (
        r'"\0224\201\200\0\1\0\1\0\0\0\0\3api\7example\4test\0\0\1\0\1'
        r'\300\f\0\1\0\1\0\0\0<\0\4\n\0\0\1"'
    )
    lines = [
        f"1 1700000000.000001 recvfrom(3<TCP:[1.2.3.4:5->6.7.8.9:53]>, {answer}, 512, 0, NULL, NULL) = 50",
        f"1 1700000000.000002 recvfrom(4<UDP:[1.2.3.4:5]>, {answer}, 512, 0, NULL, NULL) = 50",
        "1 1700000000.000003 connect(5<TCP:[7]>, {sa_family=AF_INET, sin_port=htons(443), "
        'sin_addr=inet_addr("10.0.0.1")}, 16) = 0',
    ]
    events, _ = parse(lines=lines)
    (dns,) = pick(events, type="net.dns")
    assert dns.dns_name == "api.example.test" and dns.dns_answers == ["10.0.0.1"]
    assert pick(events, type="net.connect")[0].domain == "api.example.test"


def test_a_chroot_puts_its_root_in_front_of_later_absolute_names(parse, pick) -> None:
    """chroot then a rename by absolute names (no descriptor names them): below the new root
    (tests/witness/test_chroot_paths.py plays it live under both backends)."""
    events, _ = parse("chroot")
    (chroot,) = pick(events, syscall="chroot")
    assert (chroot.type, chroot.detail, chroot.path) == ("sys.sensitive", "chroot /tmp/sgfx/jail", "/tmp/sgfx/jail")
    (rename,) = pick(events, syscall="rename")
    assert (rename.path, rename.target) == ("/tmp/sgfx/jail/etc/x.new", "/tmp/sgfx/jail/etc/x")
    (create,) = pick(events, path="/tmp/sgfx/jail/etc/x.new", type="file.create")
    assert create.raw_path == "/etc/x.new"
