"""The run's agent for tests/witness/test_chroot_paths.py (root): ``chroot_write.py ROOT NEW FINAL``
chroots to ROOT, then writes NEW and renames it to FINAL, both absolute names as the chrooted
process sees them (below ROOT on the host).  A refused call is a failed test."""

from __future__ import annotations

import os
import sys

root, new, final = sys.argv[1:4]
os.chroot(root)
os.chdir("/")
with open(new, "w") as f:
    f.write("echo hello\n")
os.rename(new, final)
