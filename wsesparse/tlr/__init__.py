"""Tile low-rank (TLR) matrices and the three-phase TLR-MVM.

A dense but data-sparse matrix A (m x n) is cut into nb x nb tiles (the last
tile row and column are as large as what is left) and every tile is replaced
by a low-rank product ``U_ij @ V_ij.T`` with its own rank ``k_ij``. The
product ``y = A x`` then runs in three memory-bound phases (see
``_kernels/_tlrmvm.pyx``): stacked-V GEMV per tile column, a reshuffle, and
stacked-U GEMV per tile row. This is the operator format of seismic
multi-dimensional deconvolution and of the 92.58 PB/s TLR-MVM run on 48 CS-2
systems (see ``wsesparse.wafer.tlr`` for the wafer mapping).

Accuracy: :meth:`TLRMatrix.from_dense` and :meth:`TLRMatrix.from_function`
guarantee ``||A - T.toarray()||_F <= tol * ||A||_F`` for the *whole* matrix.
The error budget is spread over the tiles by a global greedy: every tile gets
a randomized (or, when that is not cheaper, full) SVD, and singular values are
dropped across all tiles in increasing order of "energy removed per byte
saved" until the budget is spent. This keeps fewer bytes than giving every
tile the same relative tolerance.

Modules: :mod:`~wsesparse.tlr.matrix` (:class:`TLRMatrix`, its products and
layout), :mod:`~wsesparse.tlr.batch` (:class:`TLRBatch`),
:mod:`~wsesparse.tlr.compression` (the per-tile factorizations and the global
rank allocation), :mod:`~wsesparse.tlr.io` (``.npz`` files); ``_validate``
and ``_layout`` hold the argument checks and the aligned base buffers.
"""

from wsesparse.tlr.matrix import TLRMatrix
from wsesparse.tlr.batch import TLRBatch

__all__ = ["TLRMatrix", "TLRBatch"]
