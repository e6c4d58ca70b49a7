#!/usr/bin/env bash
# Build the eBPF capture program (spyglass/capture/ebpf/bpf/spyglass.bpf.o) from its C source.
# CO-RE: vmlinux.h is generated from this machine's BTF at build time; the object then loads on
# any kernel with BTF (no kernel headers needed at run time).  Needs clang, llvm-strip, bpftool and
# libbpf-dev (scripts/setup.sh installs them).  Does nothing when the object is newer than the source.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=spyglass/capture/ebpf/bpf
src=$dir/spyglass.bpf.c
obj=$dir/spyglass.bpf.o
if [ -f "$obj" ] && [ "$obj" -nt "$src" ] && [ "${1:-}" != "--force" ]; then exit 0; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then
  echo "build-bpf: /sys/kernel/btf/vmlinux is missing: this kernel has no BTF, the eBPF backend is unavailable" >&2
  exit 1
fi
for tool in clang llvm-strip bpftool; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build-bpf: $tool is missing (run ./scripts/setup.sh)" >&2; exit 1; }
done
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$build/vmlinux.h"
arch=$(uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
clang -g -O2 -target bpf -D__TARGET_ARCH_"$arch" -I"$build" -c "$src" -o "$build/spyglass.bpf.o"
llvm-strip -g "$build/spyglass.bpf.o"
mv "$build/spyglass.bpf.o" "$obj"
echo "build-bpf: built $obj" >&2
