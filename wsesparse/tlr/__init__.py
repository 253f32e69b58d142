"""Tile low-rank (TLR) matrices and the three-phase TLR-MVM: see :mod:`wsesparse.tlr.matrix`."""

from wsesparse.tlr.matrix import TLRBatch, TLRMatrix, _kernel_dtype  # noqa: F401 (wsesparse.dask)

__all__ = ["TLRMatrix", "TLRBatch"]
