"""Re-record the strace fixtures in this directory (needs root, strace 6.1, x86_64).

Each workload below is a small Python program; it runs under the same strace
command line the backend uses, and the output is saved as ``<name>.strace``.
The files are committed: the parser tests read them and never run strace.
Run: ``python tests/capture/strace/data/record_fixtures.py`` (from the repo
root; ``... record_fixtures.py clock`` records only ``clock.strace``, ``... newmount`` only
``newmount.strace``, ``... chroot`` only ``chroot.strace``).  Paths in the fixtures live under ``/tmp/sgfx``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = Path("/tmp/sgfx")
PY = os.path.realpath(sys.executable)

# kept in step with spyglass.capture.strace.backend.TRACE_SET
sys.path.insert(0, str(HERE.parents[3]))
from spyglass.capture.strace.backend import strace_command  # noqa: E402

FILES = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.chdir("/tmp/sgfx")
os.makedirs("sub", exist_ok=True)
open("x", "w").write("hi")
os.chdir("sub")
open("../x").read()
d = os.open("/tmp/sgfx", os.O_RDONLY | os.O_DIRECTORY)
os.close(os.open("x", os.O_RDONLY, dir_fd=d))
for fn in (lambda: os.open("nope", os.O_RDONLY, dir_fd=d), lambda: open("/tmp/sgfx/none/a")):
    try: fn()
    except OSError: pass
libc.syscall(2, b"/tmp/sgfx/x", os.O_RDWR, 0)                       # open
libc.syscall(85, b"/tmp/sgfx/created", 0o640)                      # creat
how = (ctypes.c_uint64 * 3)(os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, 0)
libc.syscall(437, -100, b"/tmp/sgfx/o2", ctypes.byref(how), 24)    # openat2
os.close(os.open("/tmp/sgfx/x", os.O_WRONLY | os.O_APPEND))
os.close(os.open("/tmp/sgfx/x", os.O_PATH))
open("/proc/self/cwd/../x").read()
fd = os.open("/tmp/sgfx/x", os.O_RDONLY)
open(f"/proc/self/fd/{fd}").read()
os.rename("/tmp/sgfx/created", "/tmp/sgfx/renamed")
os.rename("renamed", "x2", src_dir_fd=d, dst_dir_fd=d)             # renameat
libc.renameat2(-100, b"/tmp/sgfx/x2", -100, b"/tmp/sgfx/x", 0)    # renameat2 over an existing file
libc.renameat2(-100, b"/tmp/sgfx/o2", -100, b"/tmp/sgfx/x", 1)    # RENAME_NOREPLACE: EEXIST
try: os.rename("/tmp/sgfx/missing", "/tmp/sgfx/y")
except OSError: pass
os.link("/tmp/sgfx/x", "/tmp/sgfx/hl")
os.link("x", "hl2", src_dir_fd=d, dst_dir_fd=d)                     # linkat
os.symlink("x", "/tmp/sgfx/sl")
os.symlink("../etc/passwd", "sl2", dir_fd=d)                        # symlinkat
try: os.symlink("x", "/tmp/sgfx/sl")
except OSError: pass
os.chmod("/tmp/sgfx/x", 0o755)
os.chmod(fd, 0o644)                                                 # fchmod
os.chmod("hl", 0o4755, dir_fd=d)                                    # fchmodat
try: os.chmod("/tmp/sgfx/missing", 0o600)
except OSError: pass
os.chown("/tmp/sgfx/x", 1000, 1000)
os.fchown(fd, 0, -1)
os.lchown("/tmp/sgfx/sl", 1000, -1)
os.chown("hl2", -1, 1000, dir_fd=d)                                 # fchownat
os.mkdir("/tmp/sgfx/d1", 0o700)
os.mkdir("d2", dir_fd=d)                                            # mkdirat
try: os.mkdir("/tmp/sgfx/d1")
except OSError: pass
os.truncate("/tmp/sgfx/hl", 0)
w = os.open("/tmp/sgfx/hl2", os.O_WRONLY)
os.truncate(w, 1)                                                   # ftruncate
os.rmdir("/tmp/sgfx/d1")
os.rmdir("d2", dir_fd=d)                                            # unlinkat AT_REMOVEDIR
os.unlink("hl2", dir_fd=d)                                          # unlinkat
for p in ("hl", "sl", "sl2", "o2", "x"): os.unlink("/tmp/sgfx/" + p)
try: os.unlink("/tmp/sgfx/missing")
except OSError: pass
bad = b"/tmp/sgfx/caf\xc3\xa9-\xff\xfe.bin"
open(bad, "wb").close()
os.rename(bad, b"/tmp/sgfx/\xe9t\xe9 \"q\"\\n.txt")
os.unlink(b"/tmp/sgfx/\xe9t\xe9 \"q\"\\n.txt")
os.chdir(d)                                                         # fchdir
try: os.chdir("/tmp/sgfx/nonexistent")
except OSError: pass
open("sub/y", "w").close()
os.unlink("sub/y")
os.rmdir("sub")
"""

PROCS = r"""
import os, subprocess, threading, time, sys
os.chdir("/tmp/sgfx")
def worker(): open("/etc/hostname").read()
ts = [threading.Thread(target=worker) for _ in range(3)]
for t in ts: t.start()
for t in ts: t.join()
subprocess.run(["sh", "-c", "exit 3"])                  # vfork; python searches PATH (failed execs)
try: subprocess.run(["no-such-program-xyz"])
except OSError: pass
pid = os.fork()                                         # clone (fork)
if pid == 0:
    os.chdir("/usr")
    os.execv("./bin/true", ["true", "relative"])
os.waitpid(pid, 0)
pid = os.fork()
if pid == 0:
    fd = os.open("/bin/true", os.O_RDONLY)
    os.execve(fd, ["true", "via-fd"], {})               # execveat(fd, "", AT_EMPTY_PATH)
os.waitpid(pid, 0)
subprocess.run(["sh", "-c", "kill -9 $$"])
subprocess.run(["sh", "-c", "(sleep 0.2; echo late > /tmp/sgfx/late) & exit 0"])
time.sleep(0.5)
subprocess.run(["sh", "-c", "cd /tmp && exec cat sgfx/late"], stdout=subprocess.DEVNULL)
def exec_from_thread():
    os.execv("/bin/true", ["true", "from-thread"])
pid = os.fork()
if pid == 0:
    threading.Thread(target=exec_from_thread).start()
    time.sleep(5)
os.waitpid(pid, 0)
os.unlink("/tmp/sgfx/late")
"""

PRIV = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
foreign = int(sys.argv[1])
os.chdir("/tmp/sgfx")
# capabilities: drop CAP_SYS_ADMIN from the effective set
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
libc.capget(ctypes.byref(hdr), ctypes.byref(data))
data[0] &= ~(1 << 21)
libc.capset(ctypes.byref(hdr), ctypes.byref(data))
data[0] |= 1 << 21
libc.capset(ctypes.byref(hdr), ctypes.byref(data))
pid = os.fork()
if pid == 0:
    os.setresgid(1000, 1000, 1000)
    os.setregid(1000, 1000)
    os.setgid(1000)
    libc.setfsgid(1000)
    libc.setfsuid(1000)
    os.setreuid(1000, 1000)
    os.setresuid(1000, 1000, 1000)
    os.setuid(1000)
    try: open("/etc/shadow")
    except OSError: pass
    try: os.setuid(0)
    except OSError: pass
    os._exit(0)
os.waitpid(pid, 0)
# sensitive calls
child = os.fork()
if child == 0:
    time.sleep(3); os._exit(0)
libc.ptrace(16, child, 0, 0)                     # PTRACE_ATTACH (fails: already traced)
libc.ptrace(16, foreign, 0, 0)
os.close(os.memfd_create("payload", 0))
params = (ctypes.c_uint8 * 120)()
libc.syscall(425, 4, ctypes.byref(params))       # io_uring_setup
attr = (ctypes.c_uint8 * 128)()
libc.syscall(321, 5, ctypes.byref(attr), 128)    # bpf(BPF_PROG_LOAD)
libc.syscall(175, None, 0, b"")                  # init_module
nul = os.open("/dev/null", os.O_RDONLY)
libc.syscall(313, nul, b"", 0)                   # finit_module
ns = os.fork()
if ns == 0:
    libc.unshare(0x00020000 | 0x40000000)        # CLONE_NEWNS|CLONE_NEWNET
    libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None)   # MS_REC|MS_PRIVATE
    libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, b"size=1m")
    libc.umount2(b"/mnt", 2)                     # MNT_DETACH
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    libc.setns(fd, 0x40000000)
    os._exit(0)
os.waitpid(ns, 0)
os.kill(foreign, 0)
os.kill(os.getpid(), 0)
os.kill(child, signal.SIGTERM)
os.kill(0, 0)
libc.syscall(200, foreign, 0)                    # tkill
libc.syscall(234, foreign, foreign, 0)           # tgkill
libc.syscall(234, os.getpid(), os.getpid(), 0)
os.waitpid(child, 0)
"""

NET = r"""
import os, socket, struct, threading
def dns_answer(q: bytes, ip: str) -> bytes:
    tid = q[:2]
    qend = 12
    while q[qend]: qend += q[qend] + 1
    question = q[12:qend + 5]
    qtype = struct.unpack(">H", q[qend + 1:qend + 3])[0]
    head = tid + struct.pack(">HHHHH", 0x8180, 1, 0, 0, 0)
    if qtype == 1:
        cname = b"\xc0\x0c" + struct.pack(">HHIH", 5, 1, 60, 7) + b"\x04edge\xc0\x0c"
        ptr = b"\xc0" + bytes([len(question) + 12 + 12])  # -> the CNAME target
        a = ptr + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
        head = tid + struct.pack(">HHHHH", 0x8180, 1, 2, 0, 0)
        return head + question + cname + a
    return head + question
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
srv.bind(("127.0.0.1", 0))
port = srv.getsockname()[1]
def serve():
    for _ in range(2):
        q, peer = srv.recvfrom(512)
        srv.sendto(dns_answer(q, "127.0.0.1"), peer)
threading.Thread(target=serve, daemon=True).start()
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(); tport = tcp.getsockname()[1]
def query(name: str, qtype: int) -> bytes:
    qn = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + qn + struct.pack(">HH", qtype, 1)
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.sendto(query("api.example.test", 1), ("127.0.0.1", port))
c.recvfrom(512)
c2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c2.connect(("127.0.0.1", port))
c2.sendmsg([query("api.example.test", 28)])
c2.recvmsg(512)
s = socket.socket(); s.connect(("127.0.0.1", tport)); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); s.close()
n = socket.socket(); n.setblocking(False)
try: n.connect(("127.0.0.1", tport))
except BlockingIOError: pass
try: socket.create_connection(("127.0.0.1", 1))
except OSError: pass
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"ping", ("127.0.0.1", 9))
u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
try: u6.sendto(b"ping6", ("::1", 9))
except OSError: pass
l6 = socket.socket(socket.AF_INET6); l6.bind(("::1", 0)); l6.listen()
c6 = socket.socket(socket.AF_INET6); c6.connect(("::1", l6.getsockname()[1]))
us = socket.socket(socket.AF_UNIX); us.bind("/tmp/sgfx/sock"); us.listen()
uc = socket.socket(socket.AF_UNIX); uc.connect("/tmp/sgfx/sock"); uc.send(b"hello")
ab = socket.socket(socket.AF_UNIX)
try: ab.connect("\0spyglass-abstract")
except OSError: pass
os.unlink("/tmp/sgfx/sock")
"""

NAMES = r"""
import os, socket
for n in [b"a>b", b"a) = 5", b'q"uote', b"nl\nx", b"back\\slash", b"lt<gt>", b"\x7f", b"a,b"]:
    p = b"/tmp/sgfx/" + n
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
    os.rename(p, p + b"2")
    os.unlink(p + b"2")
us = socket.socket(socket.AF_UNIX); us.bind("/tmp/sgfx/so>ck"); us.listen()
uc = socket.socket(socket.AF_UNIX); uc.connect("/tmp/sgfx/so>ck"); uc.send(b"hello")
os.unlink("/tmp/sgfx/so>ck")
"""

ABORT = r"""
import os, resource
resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
os.abort()
"""

RESOLVER = r"""
import socket
print(socket.getaddrinfo("real.spyglass.test", 443, type=socket.SOCK_STREAM))
ip = socket.gethostbyname("fromhosts.spyglass.test")
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect((ip, 80))
"""

# other processes and files reached sideways; argv[1] is a foreign process (a sleep)
ACCESS = r"""
import ctypes, fcntl, os, signal, sys, termios
libc = ctypes.CDLL(None, use_errno=True)
foreign = int(sys.argv[1])
open("/tmp/sgfx/secret", "w").write("s")
class FH(ctypes.Structure):
    _fields_ = [("n", ctypes.c_uint), ("t", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
fh = FH(); fh.n = 128; mnt = ctypes.c_int()
libc.name_to_handle_at(-100, b"/tmp/sgfx/secret", ctypes.byref(fh), ctypes.byref(mnt), 0)
root = os.open("/tmp", os.O_RDONLY)
os.close(libc.open_by_handle_at(root, ctypes.byref(fh), os.O_RDONLY))
p = os.open("/tmp/sgfx", os.O_PATH)
a = os.dup(p); b = os.dup2(p, 50); c = fcntl.fcntl(p, fcntl.F_DUPFD, 60)
libc.dup3(p, 70, os.O_CLOEXEC); libc.dup(p)
os.close(p)
r, w = os.pipe(); os.dup2(r, 50)                                     # 50 now names a pipe
open(f"/proc/self/fd/{c}/secret").read()
os.close(os.open("secret", os.O_RDONLY, dir_fd=a))
pidfd = os.pidfd_open(foreign)
signal.pidfd_send_signal(pidfd, 0)
libc.syscall(438, pidfd, 0, 0)                                      # pidfd_getfd
buf = ctypes.create_string_buffer(8)
class IOV(ctypes.Structure): _fields_ = [("b", ctypes.c_void_p), ("l", ctypes.c_size_t)]
iov = IOV(ctypes.addressof(buf), 8)
libc.process_vm_readv(foreign, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0)
libc.process_vm_writev(foreign, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0)
master, slave = os.openpty()
try: fcntl.ioctl(slave, termios.TIOCSTI, b"x")
except OSError: pass
os.killpg(os.getpgrp(), 0)
os.kill(0, 0)
"""


def record(name: str, code: str, args: list[str], *, wrap: list[str] | None = None) -> None:
    prog = WORK / f"{name}.py"
    prog.write_text(textwrap.dedent(code))
    out = HERE / f"{name}.strace"
    cmd = strace_command(str(out), [*(wrap or []), PY, "-I", "-S", str(prog), *args])
    subprocess.run(cmd, cwd=WORK, check=False)
    print(f"{out.name}: {sum(1 for _ in out.open(errors='surrogateescape'))} lines")


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    record("files", FILES, [])
    record("procs", PROCS, [])
    foreign = subprocess.Popen(["sleep", "30"])
    try:
        record("priv", PRIV, [str(foreign.pid)])
        record("access", ACCESS, [str(foreign.pid)])
    finally:
        foreign.kill()
        foreign.wait()
    record("net", NET, [])
    record("names", NAMES, [])
    record("abort", ABORT, [])
    for core in WORK.glob("core*"):
        core.unlink()
    record_cmd(
        "pidns",
        ["unshare", "-p", "-f", "--mount-proc", "sh", "-c", "sleep 0.1 & kill -0 $$; kill -0 1; wait"],
    )
    record_resolver()
    record_clock()
    record_newmount()
    record_chroot()


def record_clock() -> None:
    """The clock calls (tests/capture/progs/clock.py: refused sets, a set to now, reads)."""
    prog = HERE.parents[1] / "progs" / "clock.py"
    record_cmd("clock", ["sh", "-c", f"{PY} -I -S {prog} set && {PY} -I -S {prog} read"])


def record_newmount() -> None:
    """The new mount API (tests/capture/progs/newmount.py: a tmpfs and a bind mount, unmounted)."""
    prog = HERE.parents[1] / "progs" / "newmount.py"
    for d in ("nm-src", "nm-t"):
        (WORK / d).mkdir(exist_ok=True)
    (WORK / "nm-src" / "notes.txt").write_text("hello\n")
    record_cmd("newmount", ["sh", "-c", f"{PY} -I -S {prog} tmpfs {WORK}/nm-t && "
                                        f"{PY} -I -S {prog} clone {WORK}/nm-src {WORK}/nm-t"])


def record_chroot() -> None:
    """A chroot, then a file written and renamed by absolute names below it
    (tests/witness/progs/chroot_write.py)."""
    prog = HERE.parents[2] / "witness" / "progs" / "chroot_write.py"
    (WORK / "jail" / "etc").mkdir(parents=True, exist_ok=True)
    record_cmd("chroot", [PY, "-I", "-S", str(prog), f"{WORK}/jail", "/etc/x.new", "/etc/x"])


def record_cmd(name: str, argv: list[str]) -> None:
    out = HERE / f"{name}.strace"
    subprocess.run(strace_command(str(out), argv), cwd=WORK, check=False)
    print(f"{out.name}: {sum(1 for _ in out.open(errors='surrogateescape'))} lines")


def record_resolver() -> None:
    """glibc's own resolver against a stub DNS server, plus an /etc/hosts hit (mount namespace)."""
    stub = WORK / "dns_stub.py"
    stub.write_text(
        textwrap.dedent(r"""
        import socket, struct, sys
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.53", 53))
        while True:
            q, peer = s.recvfrom(512)
            qend = 12
            while q[qend]: qend += q[qend] + 1
            question = q[12:qend + 5]
            qtype = struct.unpack(">H", q[qend + 1:qend + 3])[0]
            n = 1 if qtype in (1, 28) else 0
            ans = b""
            if qtype == 1:
                ans = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton("10.1.2.3")
            if qtype == 28:
                v6 = socket.inet_pton(socket.AF_INET6, "fd00::1")
                ans = b"\xc0\x0c" + struct.pack(">HHIH", 28, 1, 60, 16) + v6
            s.sendto(q[:2] + struct.pack(">HHHHH", 0x8180, 1, n, 0, 0) + question + ans, peer)
    """)
    )
    (WORK / "resolv.conf").write_text("nameserver 127.0.0.53\n")
    (WORK / "hosts").write_text("127.0.0.1 localhost\n10.9.9.9 fromhosts.spyglass.test\n")
    prog = WORK / "resolver.py"
    prog.write_text(textwrap.dedent(RESOLVER))
    out = HERE / "resolver.strace"
    traced = shlex.join(strace_command(str(out), [PY, "-I", "-S", str(prog)]))
    inner = " && ".join(
        [
            f"mount --bind {WORK}/resolv.conf /etc/resolv.conf",
            f"mount --bind {WORK}/hosts /etc/hosts",
            f"({PY} {stub} & sleep 0.5; {traced}; kill $!)",
        ]
    )
    subprocess.run(["unshare", "-m", "sh", "-c", inner], cwd=WORK, check=False)
    print(f"{out.name}: {sum(1 for _ in out.open(errors='surrogateescape'))} lines")


if __name__ == "__main__":
    if sys.argv[1:] in (["clock"], ["newmount"], ["chroot"]):  # only this one (the others unchanged)
        WORK.mkdir(exist_ok=True)
        {"clock": record_clock, "newmount": record_newmount, "chroot": record_chroot}[sys.argv[1]]()
    else:
        main()
