"""The tile low-rank matrix: :class:`TLRMatrix`, its kernel layout and its products.

Compression lives in :mod:`wsesparse.tlr.compression`, the builders' bodies in
``wsesparse.tlr._build``, ``.npz`` files in :mod:`wsesparse.tlr.io`, the argument checks in
``wsesparse.tlr._validate``.
"""

from __future__ import annotations


import operator
from typing import Callable

import numpy as np
from scipy.sparse.linalg import LinearOperator

from wsesparse import _hardware
from wsesparse._checks import (CHECK_MIN_BYTES, KERNEL_DTYPES, check_allocation, check_array_allocation,
                               check_int, check_numeric_dtype, describe)
from wsesparse._drivers import contiguous_operand
from wsesparse._kernels import _tlrmvm
from wsesparse._threads import resolve_n_threads
from wsesparse.tlr import _build, io as tlr_io
from wsesparse.tlr._layout import ALIGN, copy_aligned, tile_bounds
from wsesparse.tlr._split import FORWARD_CUT_ABOVE, tile_items, wrap_items
from wsesparse.tlr._validate import check_nb, check_shape, check_tol_metadata, reject_sparse

__all__ = ["TLRMatrix"]


# Per-matrix caches, left out of pickles (empty there): cast copies of the bases, work items,
# plans (items and prefetch level).
_CACHES = ("_cast_cache", "_item_cache", "_plan_cache")


# Bases up to this fraction of L3 count as read from L3 (prefetch level 1), more as from
# DRAM (level 2): on a 2-core Zen 4 VM with 32 MB of L3, 15 and 24 MB operators ran 1.2-2.2x
# faster with the forward rows' prefetch, 6-12 MB ones as fast or faster without
# (docs/tuning.md, "One right-hand side in zmm").
L3_SHARE = 3


def _prefetch_bases(nbytes: int) -> int:
    """How the kernels prefetch bases of ``nbytes`` (``_tlrmvm.tlr_matmat``'s ``prefetch``):
    0 within one core's L2, where it gains nothing; 1 within a third of L3 (``L3_SHARE``),
    the one-vector kernels except the forward's rows in AVX-512 builds
    (``_tlrmvm.FORWARD_ROWS_PREFETCH``); 2 beyond (from DRAM, or an L3 shared with others):
    those too, and the adjoint's tiles of several vectors, which it slowed from L3
    (docs/tuning.md, "TLR tiles"). An unknown size (0) counts as exceeded."""
    hw = _hardware.current()
    if 0 < hw.l2_bytes and nbytes <= hw.l2_bytes:
        return 0
    return 1 if 0 < hw.l3_bytes and nbytes <= hw.l3_bytes // L3_SHARE else 2


class TLRMatrix:
    """A tile low-rank matrix stored for the three-phase TLR-MVM.

    Build one with :meth:`from_dense`, :meth:`from_function` or
    :meth:`from_tiles`; the constructor itself takes the kernel layout and is
    used by those and by :meth:`load`.

    Parameters
    ----------
    shape : (int, int)
        ``(m, n)``.
    nb : int
        Tile size; tile row i covers rows ``i*nb : min((i+1)*nb, m)``.
    ranks : ndarray of int64, shape (ceil(m/nb), ceil(n/nb))
        Rank of every tile.
    U, V : 1-D ndarray
        The stacked bases in the kernel layout (see ``_kernels/_tlrmvm.pyx``):
        ``V`` holds, per tile column j, ``[V_0j, V_1j, ...]`` as a row-major
        (w_j, sum_i k_ij) block; ``U`` holds, per tile row i,
        ``[U_i0, U_i1, ...]`` in column-major order.
    tol : float or None
        The accuracy the matrix was built with (metadata): None, or a finite float >= 0.

    Attributes
    ----------
    perm : ndarray of int64
        The precomputed phase-2 permutation: ``yu = yv[perm]``.

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRMatrix
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((600, 12)) @ rng.standard_normal((12, 500))
    >>> T = TLRMatrix.from_dense(A, nb=128, tol=1e-6)
    >>> T.shape, bool(T.ranks.max() <= 12)
    ((600, 500), True)
    >>> x = rng.standard_normal(500)
    >>> bool(np.allclose(T @ x, A @ x))
    True
    >>> bool(np.linalg.norm(A - T.toarray()) <= 1e-6 * np.linalg.norm(A))
    True
    """

    # ndarray @ TLRMatrix raises a TypeError instead of numpy treating T as an object scalar.
    __array_ufunc__ = None

    def __init__(self, shape: tuple[int, int], nb: int, ranks: np.ndarray,
                 U: np.ndarray, V: np.ndarray, tol: float | None = None):
        m, n = check_shape(shape)
        nb = check_nb(nb)
        # (bases in the other byte order, as save writes them on such a host: native copies)
        U, V = (a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))
                for a in (np.asarray(U), np.asarray(V)))
        self.shape = (m, n)
        self.nb = nb
        self.tol = check_tol_metadata(tol)
        ranks = np.asarray(ranks)
        # (the grid from the shape before any array of its size: a file's corrupt shape
        # must give this error, not a MemoryError from tile_bounds)
        grid = (-(-m // nb), -(-n // nb))
        if ranks.shape != grid or ranks.dtype.kind not in "iu" or (ranks < 0).any():
            raise ValueError(f"ranks must be a nonnegative int array of shape {grid}, "
                             f"got {describe(ranks)}")
        self.row_ptr = tile_bounds(m, nb)
        self.col_ptr = tile_bounds(n, nb)
        h = np.diff(self.row_ptr)
        w = np.diff(self.col_ptr)
        if (ranks > np.minimum.outer(h, w)).any():
            raise ValueError("ranks exceed the size of their tiles")
        self.ranks = ranks.astype(np.int64)
        self.ranks.setflags(write=False)
        dtype = np.dtype(U.dtype)
        if dtype not in KERNEL_DTYPES or V.dtype != dtype:
            raise TypeError(f"U and V must share one of {[str(d) for d in KERNEL_DTYPES]}, "
                            f"got U {describe(U)}, V {describe(V)}")
        self._layout()
        if U.shape != (self._u_size,) or V.shape != (self._v_size,):
            raise ValueError(f"U and V must be 1-D of lengths {self._u_size} and {self._v_size}, "
                             f"got U {describe(U)}, V {describe(V)}")
        self.U = U if (U.flags.c_contiguous and U.ctypes.data % ALIGN == 0) else copy_aligned(U)
        self.V = V if (V.flags.c_contiguous and V.ctypes.data % ALIGN == 0) else copy_aligned(V)
        self.dtype = dtype
        self._cast_cache: dict[np.dtype, tuple[np.ndarray, np.ndarray]] = {}

    def _layout(self) -> None:
        """Offsets of the stacked bases and the phase-2 permutation (from the ranks)."""
        R = self.ranks
        h = np.diff(self.row_ptr)
        w = np.diff(self.col_ptr)
        Kc = R.sum(axis=0)
        Kr = R.sum(axis=1)
        self.kcol_ptr = np.concatenate([[0], np.cumsum(Kc)]).astype(np.int64)
        self.krow_ptr = np.concatenate([[0], np.cumsum(Kr)]).astype(np.int64)
        self.v_off = np.concatenate([[0], np.cumsum(Kc * w)]).astype(np.int64)
        self.u_off = np.concatenate([[0], np.cumsum(Kr * h)]).astype(np.int64)
        self._v_size = int(self.v_off[-1])
        self._u_size = int(self.u_off[-1])
        # Tile (i, j) starts at yv_start[i, j] in tile-column order and at
        # yu_start[i, j] in tile-row order.
        self._yv_start = self.kcol_ptr[:-1][None, :] + np.cumsum(R, axis=0) - R
        self._yu_start = self.krow_ptr[:-1][:, None] + np.cumsum(R, axis=1) - R
        K = self._K = int(self.kcol_ptr[-1])
        perm = np.empty(K, dtype=np.int64)
        flat = R.ravel()
        starts_u = np.repeat(self._yu_start.ravel(), flat)
        starts_v = np.repeat(self._yv_start.ravel(), flat)
        within = np.arange(K) - np.repeat(np.cumsum(flat) - flat, flat)
        perm[starts_u + within] = starts_v + within
        self.perm = perm

    # ---------------------------------------------------------------- builders
    @classmethod
    def from_tiles(cls, shape: tuple[int, int], nb: int,
                   tiles: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | Callable,
                   dtype=None, tol: float | None = None) -> "TLRMatrix":
        """Assemble from given factors: tile (i, j) is ``U_ij @ V_ij.T``.

        Parameters
        ----------
        shape : (int, int)
        nb : int
        tiles : dict or callable
            ``tiles[(i, j)]`` (or ``tiles(i, j)``) is a pair ``(U_ij, V_ij)``
            of shapes (h_i, k) and (w_j, k); missing dict keys mean rank 0.
        dtype : dtype, optional
            Storage dtype: float32, float64, complex64 or complex128; default:
            the common dtype of the factors (float64 for integers).
        tol : float, optional
            The accuracy of the factors, recorded as ``T.tol`` (metadata): a finite
            float >= 0, or None (unknown).

        Raises
        ------
        ValueError
            For a key outside the tile grid, factors of the wrong shape, of a
            rank above ``min(h_i, w_j)``, non-finite, or out of ``dtype``'s
            range.
        TypeError
            For non-numeric factors, another ``dtype``, or complex factors
            with a real ``dtype``.

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> T = TLRMatrix.from_tiles((3, 3), 2, {(0, 0): (np.ones((2, 1)), np.ones((2, 1)))})
        >>> T.toarray()
        array([[1., 1., 0.],
               [1., 1., 0.],
               [0., 0., 0.]])
        """
        return _build.from_tiles(cls, shape, nb, tiles, dtype, tol)

    @classmethod
    def from_dense(cls, A, nb: int = 256, tol: float | None = 1e-3, *, rank: int | None = None,
                   dtype=None, seed: int | None = 0, n_threads: int | None = None,
                   progress: bool | None = False) -> "TLRMatrix":
        """Compress a dense matrix tile by tile.

        Parameters
        ----------
        A : array_like, shape (m, n)
            float32, float64, complex64 or complex128 (integers become
            float64); must be finite.
        nb : int, default 256
            Tile size. A value larger than the matrix gives a single tile.
        tol : float in (0, 1), default 1e-3
            Whole-matrix relative accuracy: ``||A - T.toarray()||_F <= tol *
            ||A||_F`` is guaranteed (computed in double precision, with a
            reserve for rounding the stored factors to ``dtype``). Must not
            be below about ``20 * eps(dtype) * sqrt(nb)``.
        rank : int, optional
            Fixed rank per tile instead of a tolerance (``tol`` is then
            ignored; no accuracy guarantee).
        dtype : dtype, optional
            Storage dtype; default ``A.dtype``.
        seed : int or None
            Seed of the randomized range finders (the result does not depend
            on the number of threads).
        n_threads : int, optional
            Threads compressing tiles in parallel; default all cores.
        progress : bool or None
            Print a progress bar over the tiles to stderr (tqdm's if installed);
            None: only when stderr is a terminal. Default False.

        Returns
        -------
        TLRMatrix

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> from wsesparse.datasets import seismic_slice
        >>> A = seismic_slice(nx=20, ny=20, order="hilbert")
        >>> T = TLRMatrix.from_dense(A, nb=100, tol=1e-3)
        >>> bool(np.linalg.norm(A - T.toarray()) <= 1e-3 * np.linalg.norm(A))
        True
        >>> bool(T.compression_ratio > 1)
        True
        """
        return _build.from_dense(cls, A, nb, tol, rank, dtype, seed, n_threads, progress)

    @classmethod
    def from_function(cls, f: Callable[[slice, slice], np.ndarray], shape: tuple[int, int],
                      nb: int = 256, tol: float | None = 1e-3, *, rank: int | None = None,
                      dtype=np.float64, seed: int | None = 0, n_threads: int | None = None,
                      progress: bool | None = False) -> "TLRMatrix":
        """Compress a matrix given by a tile generator, never holding it densely.

        Parameters
        ----------
        f : callable
            ``f(rows, cols)`` with two ``slice`` objects returns the dense block
            ``A[rows, cols]``. Called once per tile, possibly from several
            threads at once (it must be thread-safe).
        shape : (int, int)
        nb, tol, rank, seed, n_threads, progress
            As in :meth:`from_dense`. Without a global norm up front each
            tile's range finder aims at ``tol`` relative to its own norm; the
            final truncation still uses the whole-matrix budget, so the
            guarantee ``||A - T||_F <= tol ||A||_F`` holds.
        dtype : dtype, default float64
            Storage dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> f = lambda r, c: 1.0 / (1.0 + np.abs(np.arange(1000)[r, None] - np.arange(1000)[None, c]))
        >>> T = TLRMatrix.from_function(f, (1000, 1000), nb=200, tol=1e-4)
        >>> A = f(slice(0, 1000), slice(0, 1000))
        >>> bool(np.linalg.norm(A - T.toarray()) <= 1e-4 * np.linalg.norm(A))
        True
        """
        return _build.from_function(cls, f, shape, nb, tol, rank, dtype, seed, n_threads,
                                    progress)

    # Pickling and copies (Dask ships matrices to workers and hashes them for its keys):
    # the caches are left out (the cast copies of the bases: one complex128 product tripled
    # a pickle; the work items), so a used matrix pickles as it did fresh, and what
    # __init__ guarantees is restored: read-only ranks and 64-byte aligned,
    # C-contiguous bases (pickle protocols below 5 and deepcopy lost both; a review found it).
    def __getstate__(self) -> dict:
        # (in sorted order, the caches empty: a used matrix adds them to __dict__ in the
        # order of its first product, an older pickle's _K comes last, and dask's key of
        # a pickle must not change with either; copied in one C call first, as a first
        # product on another thread may add a cache meanwhile)
        state = self.__dict__.copy()
        state.update((k, {}) for k in _CACHES)
        return dict(sorted(state.items()))

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "_K" not in state:  # (a pickle of an older version)
            self._K = int(self.kcol_ptr[-1])
        self.ranks.setflags(write=False)
        for name in ("U", "V"):
            a = getattr(self, name)
            if not a.dtype.isnative:  # (a pickle from a host of the other byte order)
                a = a.astype(a.dtype.newbyteorder("="))
            if not (a.flags.c_contiguous and a.ctypes.data % ALIGN == 0):
                a = copy_aligned(a)
            setattr(self, name, a)
        self.dtype = self.U.dtype  # (native, as the kernels read it)

    # --------------------------------------------------------------- products
    @property
    def H(self) -> "_TLRAdjoint":
        """The conjugate transpose as a lazy operator (shares the bases)."""
        return _TLRAdjoint(self)

    @property
    def T(self) -> "_TLRAdjoint":  # noqa: N802 - numpy's name
        """Transpose (= ``.H`` for real matrices); complex needs ``.H`` or conj."""
        if self.dtype.kind == "c":
            raise NotImplementedError("the plain transpose of a complex TLRMatrix is not "
                                      "provided; use .H (conjugate transpose)")
        return _TLRAdjoint(self)

    def _bases(self, dtype: np.dtype):
        if dtype == self.dtype:
            return self.U, self.V
        if dtype not in self._cast_cache:
            # Promotion to a wider dtype (e.g. float32 matrix @ float64 vector)
            # casts the bases once and keeps them.
            self._cast_cache[dtype] = (self.U.astype(dtype), self.V.astype(dtype))
        return self._cast_cache[dtype]

    def _apply(self, x, adjoint: bool, n_threads: int | None):
        if (type(x) is np.ndarray and x.ndim == 1 and x.dtype == self.dtype
                and x.shape[0] == self.shape[0 if adjoint else 1]):
            # A vector of T's dtype, what solver loops pass: none of the checks and
            # conversions below applies (3-4 us of a 15 us call on a small operator), nor
            # _run's transposes; the plan takes it as it is (None: a size the path below
            # checks; docs/tuning.md, "The call"). (The length first: a wrong one is the
            # path below's shape error, whatever n_threads is.)
            nt = resolve_n_threads(n_threads, self._u_size + self._v_size, idle_rule=True)
            y = self._plan(nt, adjoint, self.dtype).vector(x)
            if y is not None:
                return y
        m, n = self.shape
        n_in, n_out = (m, n) if adjoint else (n, m)
        name = "y" if adjoint else "x"
        if x is None or np.isscalar(x):
            raise TypeError(f"{name} must be a 1-D or 2-D array, got {describe(x)}")
        reject_sparse(x, name)
        arr = np.asarray(x)
        check_numeric_dtype(arr.dtype, name)
        if arr.ndim not in (1, 2) or arr.shape[0] != n_in:
            op = "T.H" if adjoint else "T"
            shp = (n_out, n_in)
            raise ValueError(f"{op} @ {name}: {op} has shape {shp} but {name} is {describe(arr)}; "
                             f"{name} needs {n_in} rows")
        rt = np.result_type(self.dtype, arr.dtype)
        if rt not in KERNEL_DTYPES:
            # (with T of a kernel dtype and x numeric, rt is a native float or complex: outside
            # them only for an extended long double x; kernel_dtype named rt as x's dtype)
            raise TypeError(f"{name} has dtype {arr.dtype}; with T of {self.dtype} it "
                            f"would promote to {rt}; TLR matrices are float32, float64, "
                            "complex64 or complex128")
        vec = arr.ndim == 1
        X = arr.reshape(n_in, -1)
        s = X.shape[1]
        # The kernel's copy of x, its output and two work arrays of K per rhs
        # (the message only where checked: formatting it cost 10 us a call).
        nbytes = s * (n_in + n_out + 2 * self._K) * rt.itemsize
        if nbytes >= CHECK_MIN_BYTES:
            check_allocation(nbytes,
                             f"{'T.H' if adjoint else 'T'} @ {name} for {name} of shape "
                             f"{arr.shape} (result of shape {(n_out, s) if not vec else (n_out,)} "
                             f"and dtype {rt}, work arrays)")
        if s == 0:
            return np.zeros((n_out, 0) if not vec else (n_out,), dtype=rt)
        if self.dtype.kind != "c" and rt.kind == "c":
            # Real matrix, complex vector: run the real kernel on [Re x, Im x]
            # as 2s right-hand sides instead of casting the bases to complex.
            real_t = np.finfo(rt).dtype
            Xs = np.concatenate([X.real, X.imag], axis=1).astype(real_t)
            Y2 = self._run(Xs, adjoint, real_t, n_threads)
            Y = Y2[:, :s] + 1j * Y2[:, s:]
            Y = Y.astype(rt, copy=False)
        else:
            Y = self._run(X.astype(rt, copy=False), adjoint, rt, n_threads)
        return Y[:, 0] if vec else Y

    def _run(self, X: np.ndarray, adjoint: bool, dtype: np.dtype, n_threads) -> np.ndarray:
        # (the kernels take the vectors as rows: a blocked copy on the threads where numpy's
        # transposing copy is slow and serial, 0.68 against 0.40 ms for 64 complex64
        # vectors of 9801 on 2 cores)
        XT = contiguous_operand(X.T, dtype, n_threads)
        YT = np.empty((X.shape[1], self.shape[1] if adjoint else self.shape[0]), dtype=dtype)
        self._kernel(XT, YT, adjoint, dtype, n_threads)
        return YT.T

    def _kernel(self, XT: np.ndarray, YT: np.ndarray, adjoint: bool, dtype: np.dtype,
                n_threads) -> None:
        """``YT = (T or T.H) XT`` for the C-contiguous (s, n_in) and (s, n_out) arrays of
        ``dtype``."""
        nt = resolve_n_threads(n_threads, (self._u_size + self._v_size) * XT.shape[0],
                               idle_rule=True)
        self._plan(nt, adjoint, dtype)(XT, YT)

    def _plan(self, n_threads: int, adjoint: bool, dtype: np.dtype) -> _tlrmvm.Plan:
        """The kernels' plan (``_tlrmvm.Plan``: the bases of ``dtype``, the index arrays,
        the work items of :meth:`_items` and the prefetch level of the bases, checked once),
        kept per thread count, direction and dtype (docs/tuning.md, "The call")."""
        cache = self.__dict__.setdefault("_plan_cache", {})  # (absent in old pickles)
        key = (n_threads, adjoint, dtype)
        plan = cache.get(key)
        if plan is None:
            U, V = self._bases(dtype)
            index = (self.row_ptr, self.col_ptr, self.u_off, self.v_off, self.krow_ptr,
                     self.kcol_ptr, self.perm)
            plan = cache[key] = _tlrmvm.Plan(adjoint, U, V, index,
                                             *self._items(n_threads, adjoint), n_threads,
                                             _prefetch_bases(U.nbytes + V.nbytes),
                                             CHECK_MIN_BYTES)
        return plan

    def _items(self, n_threads: int, adjoint: bool) -> tuple[np.ndarray, np.ndarray]:
        """Work items of the first and last phase for ``n_threads`` (kept per count).

        Forward: the kc outputs of each tile column's block, then the h outputs of each tile
        row's, cut where the threads' equal shares of the work end where whole tiles would
        leave them unbalanced (``wrap_items``);
        adjoint: ranges of the kr rows of each tile row's block, then of the w rows of each
        tile column's (``tile_items``; wsesparse/tlr/_split.py).
        """
        cache = self.__dict__.setdefault("_item_cache", {})  # (absent in old pickles)
        key = (n_threads, adjoint)
        items = cache.get(key)
        if items is None:
            kc, kr = self.ranks.sum(axis=0), self.ranks.sum(axis=1)
            w, h = np.diff(self.col_ptr), np.diff(self.row_ptr)
            if adjoint:  # (cheap to cut: ranges of whole rows, dot products)
                items = (tile_items(kr, h, n_threads), tile_items(w, kc, n_threads))
            else:
                cut = FORWARD_CUT_ABOVE
                items = (wrap_items(kc, w, n_threads, cut_above=cut),
                         wrap_items(h, kr, n_threads, cut_above=cut))
            cache[key] = items
        return items

    def matvec(self, x, n_threads: int | None = None) -> np.ndarray:
        """``A @ x`` for a vector (n,) or a block of right-hand sides (n, s).

        Parameters
        ----------
        x : array_like, shape (n,) or (n, s)
            Any memory layout; a bool, integer, float or complex dtype. The product takes
            numpy's promotion of it with the bases' dtype, widened to a kernel dtype
            (float32, float64, complex64, complex128): with float32 bases, float16 and int8
            give float32, int64 gives float64.
        n_threads : int, optional
            Threads of the kernels (positive); default as ``sparse_matmul``'s.

        Returns
        -------
        numpy.ndarray, shape (m,) or (m, s)
            Of the promoted dtype. A complex ``x`` with real bases runs its real and
            imaginary parts as 2s real right-hand sides.

        Raises
        ------
        TypeError
            If ``x`` is None, a scalar, a sparse matrix, or of a dtype that is not numeric.
        ValueError
            If ``x`` is not 1-D or 2-D with n rows.

        Notes
        -----
        The s right-hand sides share each read of the bases, so a block costs less than s
        products of one vector (docs/tuning.md, "TLR tiles"). Each output element is summed
        in a fixed order: the result has the same bits for any thread count and any s (a
        column of a block equals the product of that column alone).

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> A = np.add.outer(np.arange(6.0), np.arange(6.0))  # rank 2
        >>> T = TLRMatrix.from_dense(A, nb=3, tol=1e-6)
        >>> X = np.ones((6, 4))
        >>> np.allclose(T.matvec(X), A @ X), np.array_equal(T.matvec(X)[:, 1], T @ X[:, 1])
        (True, True)
        """
        return self._apply(x, False, n_threads)

    matmat = matvec

    def rmatvec(self, y, n_threads: int | None = None) -> np.ndarray:
        """``A^H @ y`` (conjugate transpose) for (m,) or (m, s), from the same bases.

        No transposed or conjugated copy is stored: the adjoint reads the bases in the order
        the forward product does. Arguments, results, errors and the bit-for-bit guarantees
        are those of :meth:`matvec`, with m and n swapped.

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> A = np.add.outer(np.arange(6.0), 1j * np.arange(6.0))
        >>> T = TLRMatrix.from_dense(A, nb=3, tol=1e-6)
        >>> y = np.ones(6)
        >>> bool(np.allclose(T.rmatvec(y), A.conj().T @ y))
        True
        """
        return self._apply(y, True, n_threads)

    rmatmat = rmatvec

    def __matmul__(self, x):
        if isinstance(x, (TLRMatrix, _TLRAdjoint)):
            return NotImplemented
        return self._apply(x, False, None)

    # ------------------------------------------------------------- inspection
    def tile(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(U_ij, V_ij)`` of tile (i, j), with ``A_ij ~ U_ij @ V_ij.T``.

        ``i`` and ``j`` index the tile grid (``T.ranks.shape``); negative ones count from
        the end, as in numpy. Raises IndexError outside the grid.

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> A = np.add.outer(np.arange(10.0), np.arange(7.0))
        >>> T = TLRMatrix.from_dense(A, nb=4, tol=1e-9)
        >>> U, V = T.tile(-1, 0)  # the last tile row: rows 8-9
        >>> bool(np.allclose(U @ V.T, A[8:, :4]))
        True
        """
        grid = self.ranks.shape
        ij = []
        for name, v, size in (("i", i, grid[0]), ("j", j, grid[1])):
            v = operator.index(v)
            if not -size <= v < size:
                raise IndexError(f"tile {name}={v} is out of the {grid[0]} x {grid[1]} tile "
                                 "grid")
            ij.append(v % size)
        i, j = ij
        h = self.row_ptr[i + 1] - self.row_ptr[i]
        w = self.col_ptr[j + 1] - self.col_ptr[j]
        k = self.ranks[i, j]
        Kr = self.krow_ptr[i + 1] - self.krow_ptr[i]
        Kc = self.kcol_ptr[j + 1] - self.kcol_ptr[j]
        ub = self.U[self.u_off[i]:self.u_off[i + 1]].reshape(Kr, h)
        vb = self.V[self.v_off[j]:self.v_off[j + 1]].reshape(w, Kc)
        su = self._yu_start[i, j] - self.krow_ptr[i]
        sv = self._yv_start[i, j] - self.kcol_ptr[j]
        return ub[su:su + k].T, vb[:, sv:sv + k]

    def toarray(self) -> np.ndarray:
        """The dense matrix ``sum_ij U_ij V_ij^T`` placed at its tiles.

        Raises MemoryError at once if it would not fit in the memory available.
        """
        check_array_allocation(self.shape, self.dtype, "TLRMatrix.toarray()")
        out = np.zeros(self.shape, dtype=self.dtype)
        for i in range(self.ranks.shape[0]):
            for j in range(self.ranks.shape[1]):
                if self.ranks[i, j]:
                    Uij, Vij = self.tile(i, j)
                    out[self.row_ptr[i]:self.row_ptr[i + 1],
                        self.col_ptr[j]:self.col_ptr[j + 1]] = Uij @ Vij.T
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the stacked U and V bases (what one TLR-MVM streams)."""
        return int(self.U.nbytes + self.V.nbytes)

    @property
    def dense_nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    @property
    def compression_ratio(self) -> float:
        """Dense bytes over TLR bytes (higher is better)."""
        return self.dense_nbytes / max(self.nbytes, 1)

    def mvm_bytes(self, n_rhs: int = 1) -> int:
        """Bytes one product moves by the bandwidth measure of the TLR-MVM record.

        The bases once plus the input and output vectors once:
        ``nbytes + (m + n) * itemsize * n_rhs``.
        """
        n_rhs = check_int(n_rhs, "n_rhs", minimum=1)
        return self.nbytes + (self.shape[0] + self.shape[1]) * self.dtype.itemsize * n_rhs

    def aslinearoperator(self) -> LinearOperator:
        """A :class:`scipy.sparse.linalg.LinearOperator` with matvec and rmatvec.

        Examples
        --------
        >>> import numpy as np
        >>> from scipy.sparse.linalg import lsqr
        >>> from wsesparse import TLRMatrix
        >>> A = np.eye(300) + 0.01 * np.ones((300, 300))
        >>> op = TLRMatrix.from_dense(A, nb=64, tol=1e-8).aslinearoperator()
        >>> x = lsqr(op, A @ np.ones(300), atol=1e-12, btol=1e-12)[0]
        >>> bool(np.allclose(x, 1))
        True
        """
        return LinearOperator(self.shape, matvec=self.matvec, rmatvec=self.rmatvec,
                              matmat=self.matvec, rmatmat=self.rmatvec, dtype=self.dtype)

    def __repr__(self) -> str:
        return (f"<TLRMatrix {self.shape[0]}x{self.shape[1]} {self.dtype} nb={self.nb} "
                f"tiles={self.ranks.shape[0]}x{self.ranks.shape[1]} "
                f"ranks mean {self.ranks.mean():.1f} max {self.ranks.max()} "
                f"compression {self.compression_ratio:.1f}x>")

    # ------------------------------------------------------------ persistence
    def save(self, file) -> None:
        """Write to an ``.npz`` file (bases, ranks, shape, nb, tol)."""
        tlr_io.save(self, file)

    @classmethod
    def load(cls, file) -> "TLRMatrix":
        """Read what :meth:`save` wrote (the layout is rebuilt and checked).

        ``file`` is a path or a binary file object; one that cannot seek (a pipe, a socket)
        is read whole first. Bases stored in the other byte order are read into native ones.

        Raises
        ------
        FileNotFoundError, IsADirectoryError, PermissionError
            As ``open`` does for a path that cannot be read.
        ValueError
            Anything that is not an intact file written by :meth:`save`
            (empty, truncated, another format, missing or malformed fields,
            ranks or bases that do not fit together).
        """
        return tlr_io.load(cls, file)


class _TLRAdjoint:
    """``T.H``: the conjugate transpose, applied with the same bases."""

    __array_ufunc__ = None

    def __init__(self, parent: TLRMatrix):
        self._p = parent
        self.shape = (parent.shape[1], parent.shape[0])
        self.dtype = parent.dtype

    @property
    def H(self) -> TLRMatrix:
        return self._p

    def matvec(self, y, n_threads: int | None = None) -> np.ndarray:
        return self._p.rmatvec(y, n_threads)

    def rmatvec(self, x, n_threads: int | None = None) -> np.ndarray:
        return self._p.matvec(x, n_threads)

    matmat = matvec     # (blocks of vectors, as TLRMatrix's)
    rmatmat = rmatvec

    @property
    def T(self) -> TLRMatrix:  # noqa: N802 - numpy's name
        """The transpose: the matrix itself, for real values (see ``TLRMatrix.T``)."""
        if self.dtype.kind == "c":
            raise NotImplementedError("the plain transpose of a complex TLRMatrix is not "
                                      "provided; use .H (conjugate transpose)")
        return self._p

    def aslinearoperator(self) -> LinearOperator:
        """A :class:`scipy.sparse.linalg.LinearOperator` of the adjoint (matvec: ``T^H y``,
        rmatvec: ``T x``)."""
        return LinearOperator(self.shape, matvec=self.matvec, rmatvec=self.rmatvec,
                              matmat=self.matvec, rmatmat=self.rmatvec, dtype=self.dtype)

    def __matmul__(self, y):
        if isinstance(y, (TLRMatrix, _TLRAdjoint)):
            return NotImplemented  # (as TLRMatrix: no lazy TLR @ TLR)
        return self._p.rmatvec(y)

    def toarray(self) -> np.ndarray:
        return self._p.toarray().conj().T

    def __repr__(self) -> str:
        return f"<adjoint of {self._p!r}>"
