"""What the kernels need to know about the machine: one profile object.

Every fact that depends on the machine or the build is read here and nowhere
else: cache sizes (sysfs or sysconf), the vector width the kernels were
compiled for, logical CPUs, physical memory, and whether L3 reads keep up with
L2 (a one-time probe). The kernel drivers (``wsesparse._drivers``) take a
``HardwareProfile`` argument, so tests can drive them with any machine's
profile, and only ``current()`` reads this one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from wsesparse import _thresholds as th
from wsesparse._kernels import _runtime, _spmm


@dataclass(frozen=True)
class HardwareProfile:
    """Cache sizes, vector width, cores and memory of a machine and kernel build.

    Parameters
    ----------
    l2_bytes : int
        Size of one core's L2 (data or unified) cache.
    l3_bytes : int
        Size of the last-level cache CPU 0 sees, 0 if none is reported.
    vector_bytes : int
        Bytes of the vectors the kernels' register tiles use (64 with AVX-512,
        32 with AVX, 16 in the portable build without AVX):
        ``_spmm.TILE_VECTOR_BYTES``.
    kblock_tile_vectors : int
        Vectors in the tile of the column-block kernel (``ws_spmm_rows_kb``).
    cores : int
        Logical CPUs of the machine (this process may be limited to fewer,
        see ``available_cores``).
    memory_bytes : int
        Physical memory, 0 if unknown.
    fast_l3 : bool or None
        Whether L3 reads keep up with L2 (see ``l3_panel_bytes``); None: probe
        once when first asked.

    Examples
    --------
    >>> hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=32 << 20, vector_bytes=64)
    >>> hw.kblock_tile_bytes
    256
    """

    l2_bytes: int
    l3_bytes: int
    vector_bytes: int
    kblock_tile_vectors: int = 4
    cores: int = 1
    memory_bytes: int = 0
    fast_l3: bool | None = None

    @property
    def kblock_tile_bytes(self) -> int:
        """Bytes of one X row of a column-block panel (``ws_spmm_rows_kb``'s tile)."""
        return self.kblock_tile_vectors * self.vector_bytes


_SYSFS_CACHE = "/sys/devices/system/cpu/cpu0/cache"


def cache_bytes(level: int, default: int, base: str = _SYSFS_CACHE) -> int:
    """Size of the level-``level`` data/unified cache of CPU 0, from sysfs (``base``)
    or sysconf; ``default`` where neither says."""
    try:
        for entry in sorted(os.listdir(base)):
            with open(f"{base}/{entry}/level") as f:
                if int(f.read()) != level:
                    continue
            with open(f"{base}/{entry}/type") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(f"{base}/{entry}/size") as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        pass
    try:  # glibc exposes these where sysfs is missing
        size = os.sysconf(f"SC_LEVEL{level}_CACHE_SIZE")
    except (ValueError, OSError, AttributeError):
        size = 0
    return size if size and size > 0 else default


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _fast_l3_setting() -> bool | None:
    """``WSESPARSE_FAST_L3``: ``1`` or ``0`` pins the L3 answer, anything else probes."""
    forced = os.environ.get("WSESPARSE_FAST_L3", "").strip()
    return True if forced == "1" else False if forced == "0" else None


def detect() -> HardwareProfile:
    """The profile of this machine and build, read now (see ``current`` for the cached one).

    Examples
    --------
    >>> hw = detect()
    >>> hw.vector_bytes in (16, 32, 64) and hw.l2_bytes > 0
    True
    """
    return HardwareProfile(
        l2_bytes=cache_bytes(2, 1 << 20),
        l3_bytes=cache_bytes(3, 0),
        vector_bytes=_spmm.TILE_VECTOR_BYTES,
        kblock_tile_vectors=_spmm.KBLOCK_TILE_VECTORS,
        cores=os.cpu_count() or 1,
        memory_bytes=_physical_memory(),
        fast_l3=_fast_l3_setting(),
    )


_current: HardwareProfile | None = None


def current() -> HardwareProfile:
    """This machine's profile, read once per process.

    Examples
    --------
    >>> current() is current()
    True
    """
    global _current
    if _current is None:
        _current = detect()
    return _current


# -- L3: fast or not ------------------------------------------------------------

_probed: dict[tuple[int, int], bool] = {}  # (L2, L3 panel bytes) -> L3 fast


def _l3_panel_size(hw: HardwareProfile) -> int:
    size = hw.l3_bytes // th.L3_PANEL_FRACTION
    return size if size < th.L3_PANEL_MAX_BYTES else th.L3_PANEL_MAX_BYTES


def probe_fast_l3(l2_bytes: int, panel_bytes: int) -> bool:
    """Whether one core reads ``panel_bytes`` at least ``L3_FAST_RATIO`` as fast as
    half of L2 (``_runtime.read_bandwidth``, a few milliseconds; cached per sizes).

    Some machines report an L3 that comes at DRAM speed (a VM shown a host's
    shared cache): there panels must fit in L2.
    """
    key = (l2_bytes, panel_bytes)
    fast = _probed.get(key)
    if fast is None:
        # Best of 5 passes: in a fresh process the first passes over a new
        # buffer ran at a third of the later ones' rate.
        near = _runtime.read_bandwidth(l2_bytes // 2, 5)
        far = _runtime.read_bandwidth(panel_bytes, 5)
        fast = _probed[key] = far >= th.L3_FAST_RATIO * near > 0
    return fast


def l3_panel_bytes(hw: HardwareProfile) -> int:
    """The slice of X a sweep may take from L3, or 0 where L3 is not fast.

    A quarter of L3 (the cores share it with A's stream and Y), at most
    ``L3_PANEL_MAX_BYTES``; 0 when that is no more than L2, when
    ``hw.fast_l3`` is False, or when it is None and the probe finds L3 slow.
    The answer only picks panel widths; these set which register tile sums a
    column, so they may change the last bits of a real-type product (never
    with the thread count).

    Examples
    --------
    >>> l3_panel_bytes(HardwareProfile(1 << 20, 64 << 20, 32, fast_l3=True)) == 8 << 20
    True
    >>> l3_panel_bytes(HardwareProfile(1 << 20, 64 << 20, 32, fast_l3=False))
    0
    """
    size = _l3_panel_size(hw)
    if size <= hw.l2_bytes or hw.fast_l3 is False:
        return 0
    if hw.fast_l3 or probe_fast_l3(hw.l2_bytes, size):
        return size
    return 0


# -- cores ----------------------------------------------------------------------

# The affinity mask is re-read at most this often (seconds): the system call
# costs 0.5-1.5 us here, a tenth of a small product; a mask changed with
# os.sched_setaffinity takes effect within this delay.
AFFINITY_MAX_AGE = 0.05
_affinity: tuple[float, int] = (-float("inf"), 1)  # (when read, CPU count)


def available_cores() -> int:
    """CPUs this process may run on (its affinity mask, read ``AFFINITY_MAX_AGE`` s ago at most).

    Examples
    --------
    >>> 1 <= available_cores() <= (os.cpu_count() or 1)
    True
    """
    global _affinity
    now = time.monotonic()
    when, n = _affinity
    if now - when <= AFFINITY_MAX_AGE:
        return n
    n = _runtime.available_cores()  # sched_getaffinity from C: ~3x cheaper than os's
    if n <= 0:  # pragma: no cover - not Linux
        try:
            n = max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            n = max(1, os.cpu_count() or 1)
    _affinity = (now, n)
    return n


# -- load: other runnable threads ------------------------------------------------

# /proc/loadavg is re-read at most this often (seconds): its 4th field counts the
# threads runnable right now on the whole machine; reading it costs ~1.5 us.
LOAD_MAX_AGE = 0.01
_load: tuple[float, int] = (-float("inf"), 0)  # (when read, runnable threads)
_loadavg_fd: int | None = None


def runnable_threads() -> int:
    """Threads runnable on the machine right now (this one included), 0 if unknown.

    From ``/proc/loadavg`` (Linux), read ``LOAD_MAX_AGE`` s ago at most.

    Examples
    --------
    >>> runnable_threads() >= 0
    True
    """
    global _load, _loadavg_fd
    now = time.monotonic()
    when, n = _load
    if now - when <= LOAD_MAX_AGE:
        return n
    try:
        if _loadavg_fd is None:
            _loadavg_fd = os.open("/proc/loadavg", os.O_RDONLY)
        n = int(os.pread(_loadavg_fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        n = 0
    _load = (now, n)
    return n


__all__ = ["HardwareProfile", "available_cores", "cache_bytes", "current", "detect",
           "l3_panel_bytes", "probe_fast_l3", "runnable_threads"]
