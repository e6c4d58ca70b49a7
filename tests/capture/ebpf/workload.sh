# The comparison workload: run with sh in an empty directory; $PY is a Python interpreter.
mkdir sub
echo hi > sub/a.txt
mv sub/a.txt sub/b.txt
ln sub/b.txt sub/c.txt
ln -s b.txt sub/d.txt
chmod 600 sub/c.txt
cd sub && cat ../sub/b.txt > /dev/null && cd ..
rm sub/b.txt
"$PY" - <<'PYEOF'
import os, socket
fd = os.open("sub", os.O_RDONLY | os.O_DIRECTORY)
os.close(os.open("e.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
os.rename("e.txt", "f.txt", src_dir_fd=fd, dst_dir_fd=fd)
os.unlink("f.txt", dir_fd=fd)
os.mkdir("../up", dir_fd=fd)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"x", s.getsockname())
t = socket.socket()
try:
    t.connect(("127.0.0.1", 1))
except OSError:
    pass
PYEOF
sh -c 'exit 7' || true
(setsid sh -c 'sleep 0.3; echo d > daemon.txt' &)
exit 3
