"""Tiled activation layout: features to rows, tokens to column groups, SRAM per core.

Core (r, c) holds ``X[features of row r, tokens of group c]`` (the input tile),
``Y[outputs landing on row r, tokens of group c]`` (the output tile), one
accumulator of L values and ``psum_buffer_depth`` partial-sum buffers. When a
batch does not fit, the tokens of each core are processed in passes, and the
weights stream once per pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from wsesparse._checks import check_int
from wsesparse.wafer.machine import DEFAULT_DTYPE, DTYPE_BYTES, Machine, check_dtype

# The accumulator and partial-sum buffers are fp32 for both dtypes: fp16 FMACs
# accumulate in fp32 (mixed precision), so the engine never sums in fp16.
ACC_BYTES = 4


@dataclass(frozen=True)
class Layout:
    """Where the activations of one sparse GEMM live on one engine.

    Attributes
    ----------
    tokens_per_engine : int
        Tokens of the busiest engine: the batch split evenly across engines,
        ``ceil(n_tokens / engines)`` (every engine gets at least one).
    tokens_per_core : int
        Tokens of one column group, ``ceil(tokens_per_engine / cols)``.
    pass_widths : tuple of (width, count)
        Tokens per core in each pass and how many passes have that width.
    features_per_row_max, outputs_per_row_max : int
        Largest input and output tile heights.
    sram_bytes_per_core : int
        SRAM the widest pass needs on the fullest core.
    fits : bool
        Whether even one token per core fits in SRAM.
    """

    dtype: str
    n_out: int
    n_in: int
    n_tokens: int
    engines: int
    tokens_per_engine: int
    tokens_per_core: int
    pass_widths: tuple
    features_per_row_max: int
    outputs_per_row_max: int
    sram_bytes_per_core: int
    sram_bytes_available: int
    fits: bool
    note: str

    @property
    def passes(self) -> int:
        """Number of passes over the weights."""
        return sum(n for _, n in self.pass_widths)


def sram_bytes_per_token(machine: Machine, dtype: str, k_max: int, m_max: int) -> int:
    """SRAM bytes one token column costs on the fullest core."""
    b = DTYPE_BYTES[dtype]
    return k_max * b + m_max * b + ACC_BYTES + machine.psum_buffer_depth * ACC_BYTES


def make_layout(machine: Machine, n_out: int, n_in: int, n_tokens: int,
                features_per_row_max: int, engines: int = 1, dtype=DEFAULT_DTYPE) -> Layout:
    """Lay out a GEMM's activations on ``machine`` and split the batch into passes.

    Parameters
    ----------
    machine : Machine
    n_out, n_in : int
        W is ``n_out x n_in``.
    n_tokens : int
        Batch (columns of X) over all engines.
    features_per_row_max : int
        Input features on the fullest row (from the balancer).
    engines : int
        Engines sharing the batch data-parallel; weights are broadcast to all.
    dtype : {'float16', 'float32'}

    Examples
    --------
    >>> from wsesparse.wafer import WSE2
    >>> lay = make_layout(WSE2, 49152, 12288, 3_200_000, features_per_row_max=17)
    >>> lay.tokens_per_core, lay.passes, lay.fits
    (3220, 12, True)
    """
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a wafer.Machine, got {type(machine).__name__}")
    n_out = check_int(n_out, "n_out", minimum=1)
    n_in = check_int(n_in, "n_in", minimum=1)
    n_tokens = check_int(n_tokens, "n_tokens", minimum=1)
    engines = check_int(engines, "engines", minimum=1)
    k_max = check_int(features_per_row_max, "features_per_row_max", minimum=0)
    dtype = check_dtype(dtype)
    if engines > n_tokens:
        raise ValueError(f"engines ({engines}) exceeds n_tokens ({n_tokens}); "
                         "every engine needs at least one token")
    per_engine = -(-n_tokens // engines)
    per_core = -(-per_engine // machine.cols)
    m_max = -(-n_out // machine.rows)
    per_token = sram_bytes_per_token(machine, dtype, k_max, m_max)
    max_width = machine.sram_bytes // per_token
    fits = max_width >= 1
    if not fits:
        # Still cost it with one token per core, but say loudly that it cannot run.
        max_width = 1
        note = (f"does NOT fit: one token per core needs {per_token} B of SRAM "
                f"({k_max} input + {m_max} output features) but a core has "
                f"{machine.sram_bytes} B; use more rows or split the layer")
    passes = -(-per_core // max_width)
    q, rem = divmod(per_core, passes)
    widths = tuple((w, n) for w, n in ((q + 1, rem), (q, passes - rem)) if n > 0)
    if fits:
        note = ("fits in one pass" if passes == 1 else
                f"batch does not fit at once: {passes} passes of <= {widths[0][0]} tokens "
                f"per core (SRAM allows {max_width})")
    return Layout(dtype, n_out, n_in, n_tokens, engines, per_engine, per_core, widths,
                  k_max, m_max, per_token * widths[0][0], machine.sram_bytes, fits, note)
