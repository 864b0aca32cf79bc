"""Freed heap memory handed back to the system between the blocks of long loops.

glibc's malloc raises its mmap threshold each time a large block is freed, so that later
tensors of a few MB come from the heap, which keeps the holes they leave: a range search of
8,000 strings against 72,000 (blocks of rows of the same shape) grew to 2.4-4.8 GB of resident
memory, against 1.5 GB when the heap is trimmed once it has grown by :data:`FREE_BYTES_KEPT`
(13-15 s either way, 2 cores). Trimming after every block kept it lower still but cost about a
fifth of the time (the pages a block reuses are then faulted in afresh). Elsewhere (other C
libraries, other systems) this does nothing.

Layer: the standard library only.
"""
from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["release_freed_memory", "free_heap_bytes", "resident_bytes", "FREE_BYTES_KEPT"]

#: Growth since the last trim (and free heap bytes) below which :func:`release_freed_memory`
#: leaves the heap as it is.
FREE_BYTES_KEPT = 1 << 30  # 1 GiB

try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (ValueError, OSError, AttributeError):
    _PAGE = 4096


def _mallinfo_fields(field_type):
    names = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
             "fordblks", "keepcost")
    return [(name, field_type) for name in names]


class _Mallinfo2(ctypes.Structure):
    _fields_ = _mallinfo_fields(ctypes.c_size_t)


class _Mallinfo(ctypes.Structure):  # (glibc before 2.33: int fields)
    _fields_ = _mallinfo_fields(ctypes.c_int)


def _glibc():
    """``(malloc_trim, mallinfo)`` of the process's C library, or None where it has not both."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # (musl and others have no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    for name, struct in (("mallinfo2", _Mallinfo2), ("mallinfo", _Mallinfo)):
        info = getattr(libc, name, None)
        if info is not None:
            info.argtypes = []
            info.restype = struct
            return trim, info
    return None


_GLIBC = _glibc()


def free_heap_bytes() -> int:
    """The C heap's free bytes that malloc keeps (0 where unknown)."""
    if _GLIBC is None:
        return 0
    return max(0, int(_GLIBC[1]().fordblks))


def resident_bytes() -> int:
    """This process's resident memory in bytes (0 where ``/proc`` has no answer)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0

#: resident bytes just after the last trim (None: not measured yet)
_after_trim = [None]


def release_freed_memory(keep: int = FREE_BYTES_KEPT) -> bool:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim(0)``) where this
    process grew by more than ``keep`` bytes since the last trim and the heap holds more than
    ``keep`` free bytes; whether it did. (Trimming more often costs time: the pages a later
    block reuses are then faulted in again.)"""
    if _GLIBC is None:
        return False
    now = resident_bytes()
    if _after_trim[0] is None:
        _after_trim[0] = now
    if now - _after_trim[0] <= keep or free_heap_bytes() <= keep:
        return False
    _GLIBC[0](0)
    _after_trim[0] = resident_bytes()
    return True
