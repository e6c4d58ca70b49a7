# The comparison workload's risky calls: run with sh in a directory holding `sub`; $PY is a Python
# interpreter and $OTHER the pid of a process outside the tree.
"$PY" - <<'PYEOF'
import ctypes, os, signal, socket
libc = ctypes.CDLL(None, use_errno=True)
other = int(os.environ["OTHER"])
os.kill(other, 0)                                   # a signal outside the tree
fd = os.pidfd_open(other)
signal.pidfd_send_signal(fd, 0)
libc.syscall(438, fd, 0, 0)                         # pidfd_getfd
libc.syscall(310, other, None, 0, None, 0, 0)       # process_vm_readv of nothing
os.setuid(os.getuid())                              # a no-op credential change
libc.syscall(272, 0)                                # unshare(0)
libc.ioctl(0, 0x5412, b"x")                         # TIOCSTI (fails: stdin is not a tty)
buf = ctypes.create_string_buffer(128)
mount_id = ctypes.c_int()
libc.name_to_handle_at(-100, b"sub", buf, ctypes.byref(mount_id), 0)
libc.syscall(304, -100, buf, 0)                     # open_by_handle_at
libc.memfd_create(b"x", 0)
child = os.fork()
if child == 0:
    os._exit(5)
os.waitpid(child, 0)
PYEOF
