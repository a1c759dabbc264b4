"""How the simulator's arrays come from memory.

A scenario's flows are columns of millions of rows (`labs.sim.flows`), built, copied into
the core and freed. glibc's malloc serves blocks of 128 KiB and more with their own mapping
but raises that threshold to the largest block freed (up to 32 MiB), after which such
columns come from the heap, and a heap keeps what is freed: measured at 200 servers, the
plan then held 180 MB more than its arrays. Fixing the threshold at 1 MiB keeps every large
array in its own mapping, returned to the system when it is freed.
"""

from __future__ import annotations

import ctypes
from functools import cache

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number (glibc malloc.h)."""
THRESHOLD = 1 << 20


@cache
def map_large_blocks() -> bool:
    """Map blocks of 1 MiB or more on their own from now on, once per process; False where
    the C library is not glibc (nothing changes)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
        return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD))
    except (OSError, AttributeError, TypeError):
        return False
