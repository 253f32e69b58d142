"""Machine description of a wafer-scale engine: the first stage of the pipeline.

``Machine`` holds every number the cost model uses; nothing in the layout,
balancer, estimator or executor is a hidden constant. ``WSE2`` and ``WSE3`` are
presets whose fields cite their source (``../shared/DESIGN.md`` has the table);
figures marked *inferred* are our reading, not a vendor statement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from wsesparse._checks import check_int, check_real

# Operand dtypes the model knows how to cost: name -> bytes per value.
DTYPE_BYTES = {"float16": 2, "float32": 4}

# The one default dtype of every ``estimate_*`` and ``execute_*`` call: float16, the
# weight-streaming format of the seeds (fp16 value + 16-bit index per 32-bit payload,
# SDK sparse-tensor tutorial) and the format the FMAC rate of the presets is quoted in
# (SIMD-4 fp16). Pass ``dtype="float32"`` for single precision.
DEFAULT_DTYPE = "float16"


@dataclass(frozen=True)
class Machine:
    """A wafer-scale engine as the cost model sees it.

    Parameters
    ----------
    name : str
        Label printed in reports.
    rows, cols : int
        Usable core grid. Input features map to rows, token groups to columns.
    sram_bytes : int
        SRAM per core in bytes; the activation layout must fit in it.
    clock_hz : float
        Clock used to convert cycles to seconds.
    fmac_fp16, fmac_fp32 : int
        Fused multiply-accumulates per cycle per core (SIMD width) for each dtype.
    payload_bits : int
        Fabric payload per link per direction per cycle.
    cycles_per_hop : int
        Latency of one fabric hop (also one logical step of the reduction ring).
    psum_copy_cycles, psum_reset_cycles : int
        Compute-thread cost per output feature of moving the accumulator to the
        partial-sum thread and zeroing it.
    psum_add_cycles : int
        Minimum reduction-thread occupancy per output feature (the double-wide add).
    weight_message_bytes : int
        Bytes per streamed sparse weight (value + index) and per control message.
    weight_intake_bytes_per_s : float
        Weight intake bandwidth of one engine (system).
    psum_buffer_depth : int
        Partial sums a row may have waiting for the ring; a fast row runs at most
        this many outputs ahead of its own reduction.
    psum_on_wire : bool
        The machine's default reading of the partial-sum cost; every estimator
        takes ``psum="fabric"|"seed"`` to choose it per call (see
        :data:`PSUM_READINGS`), so this field is only the fallback when ``psum``
        is None. True = "fabric", False = "seed".

    The cluster fields below are used by :func:`wsesparse.wafer.estimate_training`
    (weight streaming of a whole network over 1 to ``max_engines`` engines):

    memory_bytes_per_s : float
        Bandwidth of the model memory (MemoryX) on which the optimizer runs.
    optimizer_bytes_per_param : int
        Model-memory bytes the optimizer step moves per trained parameter.
    swarmx_fanout : int
        Arity of the SwarmX broadcast/reduce tree (``ceil(log_fanout(engines))`` hops).
    swarmx_hop_s : float
        Latency of one SwarmX tree hop, paid once per streamed layer phase.
    swarmx_link_bytes_per_s : float
        Bandwidth of one tree link; the weight stream into each engine runs at
        ``min(weight_intake_bytes_per_s, swarmx_link_bytes_per_s)``.
    max_engines : int
        Largest cluster the interconnect supports.
    dense_utilization : float in (0, 1]
        Fraction of the peak FMAC rate that dense on-wafer products (attention
        scores, activations resident) reach.

    Examples
    --------
    >>> import dataclasses
    >>> from wsesparse.wafer import WSE2
    >>> small = dataclasses.replace(WSE2, rows=8, cols=4)
    >>> small.cores, small.fmac("float16")
    (32, 4)
    >>> dataclasses.replace(WSE2, rows=0)
    Traceback (most recent call last):
    ...
    ValueError: Machine.rows must be an int in [1, 1048576], got 0
    """

    name: str
    rows: int
    cols: int
    sram_bytes: int
    clock_hz: float
    fmac_fp16: int
    fmac_fp32: int
    payload_bits: int
    cycles_per_hop: int
    psum_copy_cycles: int
    psum_reset_cycles: int
    psum_add_cycles: int
    weight_message_bytes: int
    weight_intake_bytes_per_s: float
    psum_buffer_depth: int
    psum_on_wire: bool = True
    memory_bytes_per_s: float = 4e12
    optimizer_bytes_per_param: int = 36
    swarmx_fanout: int = 2
    swarmx_hop_s: float = 1e-6
    swarmx_link_bytes_per_s: float = 150e9
    max_engines: int = 192
    dense_utilization: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"Machine.name must be a str, got {type(self.name).__name__}")
        # (maxima: what the simulator's C ints and 64-bit cycle counts hold, far above any
        # wafer: a 2**70-cycle copy or a 2**40-deep buffer raised bare OverflowErrors)
        for f, top in (("rows", 2**20), ("cols", 2**20), ("sram_bytes", 2**40),
                       ("fmac_fp16", 2**20), ("fmac_fp32", 2**20), ("payload_bits", 2**20),
                       ("weight_message_bytes", 2**20), ("psum_buffer_depth", 2**20)):
            check_int(getattr(self, f), f"Machine.{f}", minimum=1, maximum=top)
        for f in ("cycles_per_hop", "psum_copy_cycles", "psum_reset_cycles", "psum_add_cycles"):
            check_int(getattr(self, f), f"Machine.{f}", minimum=0, maximum=2**31 - 1)
        for f in ("clock_hz", "weight_intake_bytes_per_s", "memory_bytes_per_s",
                  "swarmx_link_bytes_per_s"):
            check_real(getattr(self, f), f"Machine.{f}", minimum=0, inclusive=(False, True))
        check_real(self.swarmx_hop_s, "Machine.swarmx_hop_s", minimum=0)
        check_real(self.dense_utilization, "Machine.dense_utilization", minimum=0, maximum=1,
                   inclusive=(False, True))
        check_int(self.optimizer_bytes_per_param, "Machine.optimizer_bytes_per_param", minimum=0)
        check_int(self.swarmx_fanout, "Machine.swarmx_fanout", minimum=2)
        check_int(self.max_engines, "Machine.max_engines", minimum=1)
        if not isinstance(self.psum_on_wire, bool):
            raise TypeError(f"Machine.psum_on_wire must be a bool, got {self.psum_on_wire!r}")
        if self.payload_bits % 8:
            raise ValueError(f"Machine.payload_bits must be a multiple of 8, got {self.payload_bits}")

    @property
    def cores(self) -> int:
        """Number of cores in the grid."""
        return self.rows * self.cols

    @property
    def psum(self) -> str:
        """This machine's default partial-sum reading: 'fabric' or 'seed'."""
        return "fabric" if self.psum_on_wire else "seed"

    @property
    def payload_bytes(self) -> int:
        """Fabric payload bytes per link per direction per cycle."""
        return self.payload_bits // 8

    @property
    def intake_messages_per_cycle(self) -> float:
        """Weight (or control) messages the intake delivers per cycle."""
        return self.weight_intake_bytes_per_s / self.clock_hz / self.weight_message_bytes

    def fmac(self, dtype: str) -> int:
        """FMACs per cycle per core for ``dtype`` ('float16' or 'float32')."""
        dtype = check_dtype(dtype)
        return self.fmac_fp16 if dtype == "float16" else self.fmac_fp32


# The two readings of the partial-sum cost (DESIGN.md, "Two readings of the partial-sum
# cost"). Both are first-class: every estimate_* / execute_* call, `wsesparse simulate`,
# `curve` and `train` take ``psum=`` / ``--psum`` with one of these names.
PSUM_READINGS = {
    "fabric": "a partial sum of L tokens occupies a ring link for ceil(L * bytes / payload) "
              "cycles per output (our reading of a 32-bit fabric; the default). Reproduces the "
              "seed's ~10x at 90 % on the GPT-3 FFN down projection (8.5x, AXPY-bound) and "
              "saturates at tens (~5.5x GPT-3 XL to ~33x 175B) once a row gets fewer than ~2 "
              "nonzeros per output; 1 and 16 engines nearly coincide at the critical batch.",
    "seed": "the seed's literal four cycles per output (copy 1, reset 1, double-wide add 2), "
            "whatever L: reproduces 16 engines clearly below 1 engine in the seed's "
            "'Converting sparsity to acceleration' figure (GPT-3 XL down projection, 10^6 "
            "tokens: 1 engine 6.1x at 90 %, 54x at 99.9 %; 16 engines 5.7x and 27x), and for "
            "16 engines a flattening near the seed's ~1/3,000 density (27x, 33x, 38x at "
            "density 1/1,000, 1/3,333, 1/10,000); 1 engine does not flatten there (54x, 87x, "
            "136x).",
}


def with_psum(machine: Machine, psum: str | None) -> Machine:
    """``machine`` with the partial-sum reading ``psum`` ('fabric', 'seed' or None = keep).

    Examples
    --------
    >>> with_psum(WSE2, "seed").psum, with_psum(WSE2, None).psum
    ('seed', 'fabric')
    >>> with_psum(WSE2, "wire")
    Traceback (most recent call last):
    ...
    ValueError: psum must be one of ['fabric', 'seed'], got 'wire'
    """
    if psum is None:
        return machine
    if not isinstance(psum, str) or psum not in PSUM_READINGS:
        raise ValueError(f"psum must be one of {sorted(PSUM_READINGS)}, got {psum!r}")
    want = psum == "fabric"
    return machine if machine.psum_on_wire == want else dataclasses.replace(machine,
                                                                            psum_on_wire=want)


def check_dtype(dtype) -> str:
    """Normalise a dtype argument to 'float16' or 'float32', or raise naming ``dtype``."""
    if dtype is None:  # (np.dtype(None) is float64: "got float64" misled)
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)} for the wafer model, "
                         "got None")
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"dtype must be a numpy dtype or its name, got {dtype!r}") from None
    if name not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)} for the wafer model, got {name}")
    return name


WSE2 = Machine(
    name="WSE-2",
    rows=750,            # vendor SDK examples run on a 750 x 994 rectangle
    cols=994,            # (same source) -> 745,500 usable cores
    sram_bytes=48 * 1024,  # 48 KB per core: vendor SDK examples, Hot Chips 2022
    clock_hz=0.85e9,     # SDK examples convert cycles to time at 850 MHz (1.1 GHz design clock)
    fmac_fp16=4,         # 3.4 M FPUs / 850 k cores = SIMD-4 for fp16
    fmac_fp32=1,         # inferred: fp32 at a quarter of the fp16 rate
    payload_bits=32,     # seed 003: 38-bit messages = 32-bit payload + routing bits
    cycles_per_hop=1,    # inferred: one cycle per router hop
    psum_copy_cycles=1,  # seed 003: "one cycle to copy the accumulated sum to another thread"
    psum_reset_cycles=1,  # seed 003: "one cycle to reset the accumulator to zero"
    psum_add_cycles=2,   # seed 003: "two cycles to run a double-wide add ... on the partial sum chain"
    weight_message_bytes=4,  # SDK sparse-tensor tutorial: fp16 value + 16-bit index per payload
    weight_intake_bytes_per_s=150e9,  # vendor SwarmX description: 1.2 Tb/s per system
    psum_buffer_depth=2,  # inferred: double buffering of the partial-sum thread
    psum_on_wire=True,   # inferred: partial sums are real fabric traffic (fp16: 2 per payload)
    # -- cluster (weight streaming with MemoryX + SwarmX; used by estimate_training) --
    memory_bytes_per_s=4e12,  # seed 003: "the model memory has a bandwidth of 4 TB/s"
    optimizer_bytes_per_param=36,  # seed 003: ADAM keeps "four scalar values per parameter"
    #   in single precision: read + write 4 x 4 B, plus the 4-byte gradient (inferred traffic)
    swarmx_fanout=2,     # inferred: seed 003 says only "a tree structure"; binary -> log2 hops
    swarmx_hop_s=1e-6,   # inferred: ~1 us per tree hop (switch + link), not published
    swarmx_link_bytes_per_s=150e9,  # inferred: tree links carry the 1.2 Tb/s per-system stream
    max_engines=192,     # seed 002: SwarmX links "as many as 192 CS-2s"
    dense_utilization=1.0,  # seed 003: the Engine runs matrix, vector and AXPY operations
    #   "at full performance" (an upper bound; lower it to model dense inefficiency)
)

WSE3 = dataclasses.replace(
    WSE2,
    name="WSE-3",
    rows=762,            # vendor announcements: ~900 k cores, 762 x 1172 compiled grid
    cols=1172,
    sram_bytes=48 * 1024,  # inferred: 44 GB / 900 k cores ~ 48 KB per core, as on WSE-2
    max_engines=2048,    # vendor announcement (CS-3, March 2024): clusters of up to 2048 systems
    # clock, SIMD width, fabric, partial-sum and the other cluster costs: inferred
    # unchanged from WSE-2.
)

PRESETS = {"wse2": WSE2, "wse3": WSE3}
