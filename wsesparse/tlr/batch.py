"""Independent TLR matrices applied together: :class:`TLRBatch`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

import numpy as np

from wsesparse._checks import describe
from wsesparse._threads import resolve_n_threads
from wsesparse.tlr.matrix import TLRMatrix

__all__ = ["TLRBatch"]


class TLRBatch:
    """Independent TLR matrices applied together (e.g. seismic frequency slices).

    Parameters
    ----------
    matrices : iterable of TLRMatrix

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRBatch
    >>> from wsesparse.datasets import seismic_slice
    >>> As = [seismic_slice(nx=12, ny=12, frequency=f) for f in (5.0, 8.0, 11.0)]
    >>> B = TLRBatch.from_dense(As, nb=48, tol=1e-3)
    >>> xs = [np.ones(144, dtype=np.complex64)] * 3
    >>> ys = B @ xs
    >>> bool(np.allclose(ys[1], B[1] @ xs[1]))
    True
    """

    def __init__(self, matrices: Iterable[TLRMatrix]):
        if isinstance(matrices, TLRMatrix) or not isinstance(matrices, Iterable):
            raise TypeError(f"matrices must be an iterable of TLRMatrix, got {describe(matrices)}")
        self.matrices = list(matrices)
        for k, T in enumerate(self.matrices):
            if not isinstance(T, TLRMatrix):
                raise TypeError(f"matrices[{k}] must be a TLRMatrix, got {describe(T)}")

    @classmethod
    def from_dense(cls, As, nb: int = 256, tol: float = 1e-3, **kw) -> "TLRBatch":
        """Compress each matrix of ``As`` (a sequence or an (F, m, n) array)."""
        if As is None or np.isscalar(As) or (hasattr(As, "ndim") and As.ndim != 3):
            raise ValueError(f"As must be a sequence of 2-D arrays or an (F, m, n) array, "
                             f"got {describe(As)}")
        return cls(_on_slice(k, TLRMatrix.from_dense, A, nb=nb, tol=tol, **kw)
                   for k, A in enumerate(As))

    def __len__(self) -> int:
        return len(self.matrices)

    def __getitem__(self, k: int) -> TLRMatrix:
        return self.matrices[k]

    @property
    def nbytes(self) -> int:
        return sum(T.nbytes for T in self.matrices)

    @property
    def compression_ratio(self) -> float:
        return sum(T.dense_nbytes for T in self.matrices) / max(self.nbytes, 1)

    def mvm_bytes(self, n_rhs: int = 1) -> int:
        """Bytes one product of every slice moves (:meth:`TLRMatrix.mvm_bytes`, summed)."""
        return sum(T.mvm_bytes(n_rhs) for T in self.matrices)

    def matvec(self, xs, n_threads: int | None = None, adjoint: bool = False) -> list[np.ndarray]:
        """``[T_f @ x_f for f]`` with slices spread over threads (one kernel thread each).

        Many small independent products parallelise better across slices
        than inside each product (no barrier between the three phases).
        """
        if xs is None or np.isscalar(xs) or not isinstance(xs, Iterable):
            raise TypeError(f"xs must be a sequence of one vector (or block) per matrix, "
                            f"got {describe(xs)}")
        xs = list(xs)
        if len(xs) != len(self.matrices):
            raise ValueError(f"xs has {len(xs)} vectors for {len(self.matrices)} matrices")
        workers = min(resolve_n_threads(n_threads), max(len(xs), 1))
        def op(k, T, x):
            return _on_slice(k, T.rmatvec if adjoint else T.matvec, x, n_threads=1)
        ks = range(len(xs))
        if workers == 1:
            return [op(k, T, x) for k, T, x in zip(ks, self.matrices, xs)]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(op, ks, self.matrices, xs))

    def rmatvec(self, ys, n_threads: int | None = None) -> list[np.ndarray]:
        return self.matvec(ys, n_threads, adjoint=True)

    def __matmul__(self, xs):
        return self.matvec(xs)


def _on_slice(k: int, f, *args, **kw):
    """``f(*args, **kw)``; a TypeError or ValueError names slice ``k`` of the batch."""
    try:
        return f(*args, **kw)
    except (TypeError, ValueError) as exc:
        if type(exc) not in (TypeError, ValueError):
            raise
        raise type(exc)(f"slice {k}: {exc}") from exc
