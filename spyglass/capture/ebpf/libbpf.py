"""A small ctypes binding of the system libbpf (``libbpf.so.1``): open, load, attach, maps.

Only what the backend needs.  libbpf's own log lines are collected (not
printed) so that a refused load can be explained in one sentence.  A load
runs with libbpf's printing off: its ~600 debug lines would each call back
into Python, and so take the interpreter lock from the thread that prepares
the rest of the run (it loads in the background); only a load that fails is
repeated with the lines collected, to explain why.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterator

_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class LibbpfError(Exception):
    """libbpf said no; ``str()`` is one line, ``log`` has libbpf's own messages."""

    def __init__(self, message: str, code: int = 0, log: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.log = log


class _Lib:
    def __init__(self) -> None:
        # libbpf1's soname first: find_library runs `ldconfig -p` (a process: 10-40 ms of every
        # run's start), so it is only asked when that name does not load
        try:
            lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
        except OSError:
            from ctypes.util import find_library

            lib = ctypes.CDLL(find_library("bpf") or "libbpf.so.1", use_errno=True)
        vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        sigs: dict[str, tuple[object, list[object]]] = {
            "bpf_object__open_file": (vp, [cp, vp]),
            "bpf_object__load": (ci, [vp]),
            "bpf_object__close": (None, [vp]),
            "bpf_object__find_map_by_name": (vp, [vp, cp]),
            "bpf_object__find_program_by_name": (vp, [vp, cp]),
            "bpf_map__set_max_entries": (ci, [vp, ctypes.c_uint32]),
            "bpf_map__fd": (ci, [vp]),
            "bpf_program__attach": (vp, [vp]),
            "bpf_program__fd": (ci, [vp]),
            "bpf_obj_get_info_by_fd": (ci, [ci, vp, ctypes.POINTER(ctypes.c_uint32)]),
            "bpf_link__destroy": (ci, [vp]),
            "bpf_link__fd": (ci, [vp]),
            "bpf_map_update_elem": (ci, [ci, vp, vp, ctypes.c_uint64]),
            "bpf_map_lookup_elem": (ci, [ci, vp, vp]),
            "bpf_map_get_next_key": (ci, [ci, vp, vp]),
            "libbpf_num_possible_cpus": (ci, []),
            "libbpf_set_print": (vp, [_PRINT_FN]),
        }
        for fname, (res, args) in sigs.items():
            fn = getattr(lib, fname)
            fn.restype = res
            fn.argtypes = args
        self.lib = lib
        libc = ctypes.CDLL(None, use_errno=True)
        self.vsnprintf = libc.vsnprintf
        self.vsnprintf.restype = ci
        self.vsnprintf.argtypes = [cp, ctypes.c_size_t, cp, vp]
        self.log: list[str] = []
        self._printer = _PRINT_FN(self._print)  # kept alive as long as the library
        self._quiet = _PRINT_FN()  # a NULL pointer: libbpf prints nothing
        lib.libbpf_set_print(self._printer)

    def printing(self, on: bool) -> None:
        """libbpf's messages collected in ``log`` (on), or not made at all (off)."""
        self.lib.libbpf_set_print(self._printer if on else self._quiet)

    def _print(self, level: int, fmt: bytes, args: int) -> int:
        buf = ctypes.create_string_buffer(1024)
        self.vsnprintf(buf, len(buf), fmt, args)
        self.log.append(buf.value.decode("utf-8", "replace").rstrip())
        del self.log[:-200]
        return 0


_LIB: _Lib | None = None


def lib() -> _Lib:
    """The loaded library (loaded once); raises OSError when libbpf.so.1 is missing."""
    global _LIB
    if _LIB is None:
        _LIB = _Lib()
    return _LIB


def _err(what: str) -> LibbpfError:
    code = ctypes.get_errno()
    log = "\n".join(lib().log[-40:])
    return LibbpfError(f"{what}: {os.strerror(code) if code else 'failed'}", code, log)


class BpfObject:
    """A loaded BPF object file with its attached programs."""

    def __init__(self, path: str, ring_sizes: dict[str, int] | None = None) -> None:
        self._l = lib()
        self._links: list[int] = []
        self._obj: int | None = None
        self._l.printing(False)
        try:
            self._open_and_load(path, ring_sizes)
        except LibbpfError:
            self._l.printing(True)  # again, to collect libbpf's explanation
            self._open_and_load(path, ring_sizes)
        finally:
            self._l.printing(True)

    def _open_and_load(self, path: str, ring_sizes: dict[str, int] | None) -> None:
        L = self._l.lib
        self._l.log.clear()
        obj = L.bpf_object__open_file(path.encode(), None)
        if not obj:
            raise _err(f"cannot open {path}")
        self._obj = obj
        for name, size in (ring_sizes or {}).items():
            m = L.bpf_object__find_map_by_name(obj, name.encode())
            if m:
                L.bpf_map__set_max_entries(m, size)
        rc = L.bpf_object__load(obj)
        if rc:
            ctypes.set_errno(-rc if rc < 0 else rc)
            err = _err("the kernel refused to load the program")
            self.close()
            raise err

    def map_fd(self, name: str) -> int:
        assert self._obj is not None
        L = self._l.lib
        m = L.bpf_object__find_map_by_name(self._obj, name.encode())
        if not m:
            raise LibbpfError(f"no map {name!r} in the object")
        return int(L.bpf_map__fd(m))

    def attach(self, programs: list[str]) -> None:
        assert self._obj is not None
        L = self._l.lib
        for name in programs:
            prog = L.bpf_object__find_program_by_name(self._obj, name.encode())
            if not prog:
                raise LibbpfError(f"no program {name!r} in the object")
            link = L.bpf_program__attach(prog)
            if not link:
                raise _err(f"cannot attach {name}")
            self._links.append(link)

    def program_ids(self, programs: list[str]) -> dict[str, int]:
        """Kernel ids of loaded programs (for ``bpftool prog show id N``)."""
        assert self._obj is not None
        L = self._l.lib
        out: dict[str, int] = {}
        for name in programs:
            prog = L.bpf_object__find_program_by_name(self._obj, name.encode())
            fd = L.bpf_program__fd(prog) if prog else -1
            if fd < 0:
                continue
            buf = ctypes.create_string_buffer(256)
            size = ctypes.c_uint32(256)
            if L.bpf_obj_get_info_by_fd(fd, buf, ctypes.byref(size)) == 0:
                out[name] = int.from_bytes(buf.raw[4:8], "little")  # struct bpf_prog_info.id
        return out

    def link_fds(self) -> list[int]:
        """The descriptors of the attached links: a process holding a duplicate keeps the
        programs attached after this one is gone (the backend's watchdog)."""
        L = self._l.lib
        return [int(L.bpf_link__fd(link)) for link in self._links]

    def detach(self) -> None:
        L = self._l.lib
        links, self._links = self._links, []
        for link in links:
            L.bpf_link__destroy(link)

    def close(self) -> None:
        self.detach()
        obj, self._obj = self._obj, None
        if obj:
            self._l.lib.bpf_object__close(obj)

    def __del__(self) -> None:  # an object loaded but never used (a preload not taken)
        try:
            self.close()
        except Exception:
            pass


def map_update(fd: int, key: bytes, value: bytes) -> None:
    kb, vb = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value, len(value))
    if lib().lib.bpf_map_update_elem(fd, kb, vb, 0):
        raise _err("map update")


def map_lookup(fd: int, key: bytes, size: int) -> bytes | None:
    kb, vb = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(size)
    if lib().lib.bpf_map_lookup_elem(fd, kb, vb):
        if ctypes.get_errno() == errno.ENOENT:
            return None
        raise _err("map lookup")
    return vb.raw


def map_keys(fd: int, key_size: int) -> Iterator[bytes]:
    L = lib().lib
    prev: ctypes.Array[ctypes.c_char] | None = None
    nxt = ctypes.create_string_buffer(key_size)
    for _ in range(1 << 20):
        if L.bpf_map_get_next_key(fd, prev, nxt):
            return
        yield nxt.raw
        prev = ctypes.create_string_buffer(nxt.raw, key_size)


def possible_cpus() -> int:
    n = int(lib().lib.libbpf_num_possible_cpus())
    return n if n > 0 else os.cpu_count() or 1
