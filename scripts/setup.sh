#!/usr/bin/env bash
# Set up everything spyglass needs on a Debian/Ubuntu machine: system packages
# (strace, bubblewrap, python3-venv) via apt-get when missing, as root or with
# sudo; a virtual environment in .venv with the pinned Python packages.
# Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v strace >/dev/null 2>&1 || need_apt+=(strace)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# the eBPF backend's build tools (the program is built below; libbpf1 is what it needs at run time)
if [ -r /sys/kernel/btf/vmlinux ] && [ "${SPYGLASS_NO_EBPF:-}" = "" ]; then
  command -v clang >/dev/null 2>&1 || need_apt+=(clang)
  command -v llvm-strip >/dev/null 2>&1 || need_apt+=(llvm)
  command -v bpftool >/dev/null 2>&1 || need_apt+=(bpftool)
  [ -f /usr/include/bpf/bpf_helpers.h ] || need_apt+=(libbpf-dev)
  [ -f /usr/include/libelf.h ] || need_apt+=(libelf-dev)
  [ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
  ldconfig -p 2>/dev/null | grep 'libbpf\.so\.1' >/dev/null || need_apt+=(libbpf1)
fi
# EXTRA_APT_PACKAGES: more "command:package" pairs (the package is installed when the command is missing)
for pair in ${EXTRA_APT_PACKAGES:-}; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_apt+=("${pair#*:}")
done

if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=(); elif command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
    echo "setup: need ${need_apt[*]}; run as root or install sudo" >&2; exit 1; fi
  echo "setup: installing ${need_apt[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"setup: spyglass needs Python 3.11 or newer, this is {sys.version.split()[0]}")
PY

stamp=.venv/.spyglass-installed
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  python3 -m venv .venv
fi
if [ ! -f "$stamp" ] || [ constraints.txt -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages (pinned in constraints.txt)" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test,broker]'
  touch "$stamp"
fi
# the console script: Python started isolated and without site (spyglass/cli/script.py says why);
# pip's own script stays where this interpreter's path cannot be a #! line
.venv/bin/python -m spyglass.cli.script .venv/bin/spyglass ||
  echo "setup: .venv/bin/spyglass is pip's console script (started with site)" >&2

# the eBPF capture program (CO-RE object, built against this machine's BTF); without it the
# eBPF backend is unavailable and `--backend auto` uses strace
if [ -r /sys/kernel/btf/vmlinux ] && [ "${SPYGLASS_NO_EBPF:-}" = "" ]; then
  ./scripts/build-bpf.sh || echo "setup: the eBPF program did not build; capture falls back to strace" >&2
fi
