# The comparison workload's risky calls: run with sh in a directory holding `sub`; $PY is a Python
# interpreter and $OTHER the pid of a process outside the tree.
"$PY" - <<'PYEOF'
import ctypes, os, signal, socket
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long  # full-width arguments: a bare int leaves the register's upper half to chance
other = int(os.environ["OTHER"])
os.kill(other, 0)                                   # a signal outside the tree
fd = os.pidfd_open(other)
signal.pidfd_send_signal(fd, 0)
libc.syscall(L(438), L(fd), L(0), L(0))             # pidfd_getfd
libc.syscall(L(310), L(other), None, L(0), None, L(0), L(0))  # process_vm_readv of nothing
os.setuid(os.getuid())                              # a no-op credential change
libc.syscall(L(272), L(0))                          # unshare(0)
libc.ioctl(0, 0x5412, b"x")                         # TIOCSTI (fails: stdin is not a tty)
buf = ctypes.create_string_buffer(128)
mount_id = ctypes.c_int()
libc.name_to_handle_at(-100, b"sub", buf, ctypes.byref(mount_id), 0)
libc.syscall(L(304), L(-100), buf, L(0))            # open_by_handle_at
libc.memfd_create(b"x", 0)
child = os.fork()
if child == 0:
    os._exit(5)
os.waitpid(child, 0)
PYEOF
