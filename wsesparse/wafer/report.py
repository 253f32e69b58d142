"""The report of a simulated sparse GEMM: the last stage of the pipeline."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

import numpy as np

from wsesparse.wafer._compare import fields_equal


def strict_json(obj, indent: int | None = 2) -> str:
    """``obj`` as JSON text with each non-finite float as null: JSON (RFC 8259) has no NaN or
    Infinity, and strict parsers (``JSON.parse``, jq) rejected what ``json.dumps`` wrote for
    them (a review)."""
    def finite(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v
    return json.dumps(finite(obj), indent=indent, allow_nan=False)


@dataclass(frozen=True)
class GemmReport:
    """Cycle accounting of ``Y = W @ X`` on one engine (all engines run the same schedule).

    Attributes
    ----------
    cycles : int
        Simulated cycles of one engine over all passes (engines run in parallel).
    seconds : float
        ``cycles / machine.clock_hz``.
    dense_cycles : int
        Same layout and schedule with every weight nonzero.
    speedup : float
        ``dense_cycles / cycles``; inf where the run takes no cycles at all (a W of zeros
        on a machine whose partial sums cost nothing), 1.0 where neither does.
    row_nnz : ndarray
        Nonzeros (AXPYs per core) each physical row receives, per pass.
    row_cycles : ndarray
        Compute-thread busy cycles of each row over all passes.
    row_stall_cycles : ndarray
        Compute-thread cycles each row waited (intake, buffer full) over all passes.
    imbalance : float
        Max / mean of ``row_nnz``.
    efficiency : float
        ``nnz_total / (rows * nnz_max)`` of ``row_nnz``.
    bound : str
        Which lower bound is largest: 'axpy compute', 'partial-sum ring' or 'weight intake'.
    bounds : dict
        The three lower bounds in cycles.
    saturation_density : float
        Density below which the per-output fixed cost (ring or copy/reset) exceeds
        the average AXPY work of a row, so extra sparsity buys little.
    psum : str
        The partial-sum reading the estimate used: 'fabric' or 'seed'
        (``wafer.machine.PSUM_READINGS``).
    """

    machine: str
    dtype: str
    shape: tuple
    n_tokens: int
    engines: int
    nnz: int
    density: float
    balance: str
    cycles: int
    seconds: float
    dense_cycles: int
    speedup: float
    tokens_per_core: int
    passes: int
    pass_widths: tuple
    sram_bytes_per_core: int
    sram_bytes_available: int
    sram_fits: bool
    layout_note: str
    bound: str
    bounds: dict
    saturation_density: float
    weight_messages: int
    psum_wavelets: int
    fabric_bytes: int
    imbalance: float
    efficiency: float
    row_nnz: np.ndarray = field(repr=False)
    row_cycles: np.ndarray = field(repr=False)
    row_stall_cycles: np.ndarray = field(repr=False)
    psum: str = "fabric"

    __eq__ = fields_equal  # (arrays compared by value)

    def to_dict(self) -> dict:
        """Plain-Python dict (arrays become lists), ready for ``json.dumps``; floats stay
        floats, inf included (:meth:`to_json` writes it as null).

        Examples
        --------
        >>> import dataclasses, scipy.sparse as sp
        >>> from wsesparse import wafer
        >>> m = dataclasses.replace(wafer.WSE2, rows=2, cols=2)
        >>> r = wafer.estimate_gemm(sp.eye(4, format="csr"), 8, machine=m)
        >>> sorted(r.to_dict())[:3]
        ['balance', 'bound', 'bounds']
        """
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                v = v.tolist()
            elif isinstance(v, tuple):
                v = [list(x) if isinstance(x, tuple) else x for x in v]
            elif isinstance(v, np.generic):
                v = v.item()
            out[f.name] = v
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON string; a non-finite float (``speedup`` inf) is null."""
        return strict_json(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        m, k = self.shape
        rn, rc = self.row_nnz, self.row_cycles
        widths = ", ".join(f"{n} x {w}" for w, n in self.pass_widths)
        lines = [
            ("machine", f"{self.machine}, {self.dtype}, {self.engines} engine(s), "
                        f"partial sums: {self.psum} reading"),
            ("W", f"{m} x {k}, nnz {self.nnz:,} (density {self.density:.4g}), balance {self.balance}"),
            ("tokens", f"{self.n_tokens:,} total, {self.tokens_per_core} per core, "
                       f"{self.passes} pass(es) [{widths}]"),
            ("SRAM per core", f"{self.sram_bytes_per_core:,} of {self.sram_bytes_available:,} B "
                              f"({'fits' if self.sram_fits else 'DOES NOT FIT'}): {self.layout_note}"),
            ("cycles", f"{self.cycles:,} ({self.seconds * 1e3:.4g} ms)"),
            ("dense cycles", f"{self.dense_cycles:,}"),
            ("speedup", f"{self.speedup:.2f}x"),
            ("bound", f"{self.bound} (lower bounds: " + ", ".join(
                f"{k} {v:,}" for k, v in self.bounds.items()) + ")"),
            ("saturation", f"below density {self.saturation_density:.3g} the per-output "
                           "fixed cost dominates"),
            ("row nnz / pass", f"min {rn.min():,} mean {rn.mean():,.1f} max {rn.max():,}"),
            ("row busy cycles", f"min {rc.min():,} mean {rc.mean():,.1f} max {rc.max():,}"),
            ("imbalance", f"max/mean {self.imbalance:.4f}, nnz/(rows*max) {self.efficiency:.4f}"),
            ("fabric", f"{self.weight_messages:,} weight+control messages, "
                       f"{self.psum_wavelets:,} partial-sum wavelets, {self.fabric_bytes:,} B"),
        ]
        w = max(len(k) for k, _ in lines)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in lines)
