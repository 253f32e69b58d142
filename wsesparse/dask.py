"""Scale out with Dask: sparse products over token-chunked dask arrays, batched TLR-MVM.

This is the multi-engine data-parallel scheme of the wafer model on a cluster:
the tokens (columns of ``X`` in ``Y = W @ X``) are split across workers, the
weights ``W`` are sent to every worker **once** and every block is computed
with :func:`wsesparse.sparse_matmul`. Independent TLR-MVMs (e.g. seismic
frequency slices) run one slice per task.

How ``W`` travels:

- with an active ``distributed.Client`` (or ``client=`` given) that has workers, ``W`` is
  scattered with ``client.scatter(W, broadcast=True)``: one copy in the memory
  of each worker, referenced by every task through its key;
- otherwise (local threaded/process schedulers, a client with no workers yet, or an
  asynchronous default client) ``W`` is a single key of the task graph that every block
  task depends on. An asynchronous client given as ``client=`` is a TypeError.

Either way ``W`` is validated and converted to a :class:`wsesparse.CSR` once,
on the client, and never embedded in the individual tasks. Use
:func:`scatter_weights` to send it once for many products.

distributed's active memory manager (on by default: its ``ReduceReplicas``
policy runs every 2 s) drops the extra copies of a key that no waiting task
needs. Between two computations a worker may therefore lose its copy of ``W``
and fetch it again from another worker (not from the client) when its next
block task needs it. To keep one copy on every worker, start the cluster with
``dask.config.set({"distributed.scheduler.active-memory-manager.start":
False})``.

Importing this module needs dask (``pip install 'wsesparse[dask]'``); the rest
of wsesparse never imports dask.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

try:
    import dask
    import dask.array as da
except ImportError as exc:  # pragma: no cover - exercised without dask installed
    raise ImportError(
        "wsesparse.dask needs dask[array] (and distributed for clusters): "
        "pip install 'wsesparse[dask]'") from exc

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import check_int, describe
from wsesparse.csr import CSR
from wsesparse.matmul import Method
from wsesparse.matmul import sparse_matmul as _sparse_matmul
from wsesparse.tlr import TLRMatrix
from wsesparse.tlr._validate import kernel_dtype

__all__ = ["ScatteredWeights", "scatter_weights", "sparse_matmul", "scatter_tlr",
           "tlr_matvec_batch"]


# ------------------------------------------------------------------ helpers

def _check_threads(n_threads) -> int | None:
    """``n_threads`` checked where the graph is built, up to a C int (10**6 was an error of
    every block task at compute time: a review). The cap of a machine's own threads
    (``sparse_matmul``'s, 4 per core) is the workers': a client on a laptop drives nodes of
    more cores (checking it here refused 128 threads there: a review of the first fix)."""
    n_threads = check_int(n_threads, "n_threads", minimum=1, allow_none=True)
    if n_threads is not None and n_threads >= 2 ** 31:
        raise ValueError(f"n_threads must be a positive int or None, below 2**31, got "
                         f"{n_threads}")
    return n_threads


def _active_client(client):
    """The client to scatter with: ``client`` itself, the default one, or None."""
    if client is False:
        return None
    if client is not None:
        if not callable(getattr(client, "scatter", None)):
            raise TypeError(f"client must be a distributed.Client, None or False, got "
                            f"{client!r} ({type(client).__name__})")
        return client
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:  # no client is active
        return None


def _ready_client(client, what: str):
    """:func:`_active_client`'s client if a scatter can run on it now, else None (the data
    then travels in the graph, as with ``client=False``; the results are the same).

    An asynchronous client's scatter returns a coroutine, which no graph can hold (its
    ``compute`` failed to serialize it): a TypeError where it was given, None where it is
    only the default. A client without workers (an adaptive cluster at zero, workers still
    starting): None, as its scatter blocked 30 s and then failed (a review). (``workers``
    of ``scheduler_info()``, which lists at least some of them in every distributed
    release this supports: ``n_workers=`` came in 2025.)
    """
    c = _active_client(client)
    if c is None:
        return None
    if getattr(c, "asynchronous", False):
        if client is None:
            return None
        raise TypeError(f"{what} takes a synchronous distributed.Client; this one is "
                        "asynchronous (pass client=False, or use a synchronous Client)")
    if not c.scheduler_info().get("workers"):
        return None
    return c


def _is_future(x) -> bool:
    try:
        from distributed import Future
    except ImportError:
        return False
    return isinstance(x, Future)


@dataclass(frozen=True)
class ScatteredWeights:
    """A sparse weight matrix sent to the workers once (see :func:`scatter_weights`).

    Attributes
    ----------
    ref : distributed.Future or dask.delayed.Delayed
        The reference every block task receives (a key, not the data).
    shape : tuple of int
        Shape of W.
    dtype : numpy.dtype
        dtype of W's values.
    nnz : int
        Stored entries of W.
    """

    ref: Any
    shape: tuple[int, int]
    dtype: np.dtype
    nnz: int

    def __repr__(self) -> str:
        kind = "future" if _is_future(self.ref) else "graph key"
        return (f"<ScatteredWeights {self.shape[0]}x{self.shape[1]}, nnz={self.nnz}, "
                f"dtype={self.dtype}, {kind}>")


def scatter_weights(W, client=None) -> ScatteredWeights:
    """Validate ``W`` once and send it to the workers once.

    Parameters
    ----------
    W : scipy.sparse matrix/array (any format) or wsesparse.CSR
        The weights, shape (M, K).
    client : distributed.Client, None or False
        Client to broadcast with. None: the default client if one is active,
        else ``W`` becomes a single key of the task graph (``dask.delayed``).
        False: never use a client. A product of scattered weights computes only on
        that client, while it is open: another scheduler (``scheduler="threads"``)
        reports the weights as a missing dependency. Pass ``client=False`` for a
        graph that any scheduler can run.

    Returns
    -------
    ScatteredWeights
        Pass it to :func:`sparse_matmul` as often as you like; ``W`` is not
        sent again.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, dask.array as da
    >>> from wsesparse.dask import scatter_weights, sparse_matmul
    >>> W = sp.random(30, 20, density=0.2, format="csr", random_state=0)
    >>> Wd = scatter_weights(W, client=False)
    >>> X = da.ones((20, 12), chunks=(20, 4))
    >>> Y = sparse_matmul(Wd, X)
    >>> Y.shape, Y.numblocks
    ((30, 12), (1, 3))
    >>> bool(np.allclose(Y.compute(), W @ np.ones((20, 12))))
    True
    """
    if isinstance(W, ScatteredWeights):
        return W
    if isinstance(W, CSR):
        op = W
    elif sp.issparse(W):
        if W.ndim != 2:
            raise ValueError(f"W must be 2-D, got {describe(W)}")
        op = CSR(W)
    else:
        raise TypeError(f"W must be a scipy.sparse matrix/array or wsesparse.CSR, "
                        f"got {describe(W)}")
    c = _ready_client(client, "scatter_weights")
    if c is not None:
        ref = c.scatter(op, broadcast=True, hash=False)
    else:
        ref = dask.delayed(op, pure=True, name=f"wsesparse-W-{dask.base.tokenize(op)}")
    return ScatteredWeights(ref, tuple(op.shape), np.dtype(op.dtype), int(op.nnz))


# ------------------------------------------------------------------ block tasks

def _left_block(Xb: np.ndarray, W: CSR, n_threads, method) -> np.ndarray:
    """One token block of ``W @ X`` (runs on a worker)."""
    return _sparse_matmul(W, Xb, n_threads=n_threads, method=method)


def _right_block(Xb: np.ndarray, W: CSR, n_threads, method) -> np.ndarray:
    """One row block of ``X @ W`` (runs on a worker; W.T is cached per worker)."""
    return _sparse_matmul(Xb, W, n_threads=n_threads, method=method)


def _result_dtype(Wd: ScatteredWeights, x_dtype: np.dtype, left: bool) -> np.dtype:
    """dtype of the product, by sparse_matmul's own rule (on empty operands)."""
    K = Wd.shape[1] if left else Wd.shape[0]
    W0 = CSR(sp.csr_array((Wd.shape[0], Wd.shape[1]), dtype=Wd.dtype))
    if left:
        return _sparse_matmul(W0, np.empty((K, 0), dtype=x_dtype)).dtype
    return _sparse_matmul(np.empty((0, K), dtype=x_dtype), W0).dtype


def sparse_matmul(A, B, *, n_threads: int | None = 1, method: Method = "auto",
                  client=None) -> da.Array:
    """``A @ B`` with one sparse operand and one dask array, as a dask array.

    ``W @ X`` (``A`` sparse, ``B`` a dask array of shape (K, N) chunked along
    tokens, i.e. columns) or ``X @ W`` (``A`` a dask array of shape (N, K)
    chunked along rows, ``B`` sparse). ``W`` is sent to the workers once (see
    the module docstring); each block is one call of
    :func:`wsesparse.sparse_matmul` on a worker.

    If ``X`` is also chunked along K (rows for ``W @ X``, columns for
    ``X @ W``), it is first rechunked to one chunk along K: every output block
    ``Y[:, cols]`` needs all of ``X[:, cols]``, because the columns of W touch
    every input feature. The alternative, cutting W by columns and summing
    partial products, would send a different piece of W to every task and add
    a reduction of full (M, n) partial results, which is more traffic than
    gathering a (K, n) token block once. Each block then holds K x (chunk
    width) values of X and M x (chunk width) of Y: choose the token chunks so
    that fits a worker's memory.

    Parameters
    ----------
    A, B : scipy.sparse, wsesparse.CSR, ScatteredWeights, or dask.array.Array
        Exactly one is sparse (or a :class:`ScatteredWeights`), the other a 1-D
        or 2-D dask array.
    n_threads : int or None, default 1
        OpenMP threads of each block's kernel. Keep ``threads_per_worker *
        n_threads`` at most the worker's cores; with one thread per worker
        process, set it to the cores per worker. None: all cores (per task).
    method : {"auto", "sparse", "dense"}
        Passed to :func:`wsesparse.sparse_matmul` for every block.
    client : distributed.Client, None or False
        Where to scatter W (see :func:`scatter_weights`); ignored when W is
        already a :class:`ScatteredWeights`.

    Returns
    -------
    dask.array.Array
        Lazy product: (M, N) chunked like X's tokens for ``W @ X``; (N, M)
        chunked like X's rows for ``X @ W`` (1-D X gives a 1-D result).

    Raises
    ------
    TypeError
        Neither or both operands are dask arrays, the other is not sparse, or
        the dtypes have no product.
    ValueError
        Shapes do not match, X has more than 2 dimensions or unknown sizes
        along K.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, dask.array as da
    >>> from wsesparse.dask import sparse_matmul
    >>> W = sp.random(40, 30, density=0.1, format="csr", random_state=1)
    >>> X = da.random.default_rng(0).standard_normal((30, 100), chunks=(30, 25))
    >>> Y = sparse_matmul(W, X, client=False)        # 4 token blocks
    >>> Y.chunks
    ((40,), (25, 25, 25, 25))
    >>> bool(np.allclose(Y.compute(), W @ X.compute()))
    True
    >>> Z = sparse_matmul(X.T, W.T, client=False)     # X @ W form, rows of X.T chunked
    >>> bool(np.allclose(Z.compute(), X.compute().T @ W.T.toarray()))
    True
    """
    n_threads = _check_threads(n_threads)
    if method not in ("auto", "sparse", "dense"):
        raise ValueError(f"method must be 'auto', 'sparse' or 'dense', got {method!r}")
    a_dask, b_dask = isinstance(A, da.Array), isinstance(B, da.Array)
    if a_dask == b_dask:
        raise TypeError(
            "wsesparse.dask.sparse_matmul needs exactly one dask array operand, got "
            f"A {describe(A)} ({type(A).__name__}) and B {describe(B)} ({type(B).__name__}); "
            "for numpy operands use wsesparse.sparse_matmul")
    left = b_dask                       # W @ X
    W, X = (A, B) if left else (B, A)
    wname, xname = ("A", "B") if left else ("B", "A")
    if not isinstance(W, (ScatteredWeights, CSR)) and not sp.issparse(W):
        raise TypeError(f"{wname} must be a scipy.sparse matrix/array, wsesparse.CSR or "
                        f"ScatteredWeights (the other operand is a dask array), got "
                        f"{describe(W)} ({type(W).__name__})")
    if len(W.shape) != 2:   # (scipy's 1-D sparse arrays)
        raise ValueError(f"{wname} must be a 2-D sparse matrix, got shape {W.shape}")
    if X.ndim not in (1, 2):
        raise ValueError(f"{xname} must be a 1-D or 2-D dask array, got shape {X.shape}")
    k_axis = 0 if (left or X.ndim == 1) else 1
    Kx = X.shape[k_axis]
    if isinstance(Kx, float) and np.isnan(Kx):
        raise ValueError(f"{xname} has unknown chunk sizes along its inner dimension; "
                         f"call {xname}.compute_chunk_sizes() first")
    Kw = W.shape[1] if left else W.shape[0]
    if Kw != Kx:
        what = f"W @ X: W has shape {W.shape} but X" if left else \
               f"X @ W: W has shape {W.shape} but X"
        raise ValueError(f"{what} has shape {X.shape} ({xname} dtype {X.dtype}); "
                         f"the inner dimensions {Kw} and {Kx} differ")
    if not isinstance(W, ScatteredWeights):
        # Cheap checks first; the O(nnz) validation happens once, here.
        W = scatter_weights(W, client=client)
    dtype = _result_dtype(W, X.dtype, left)

    vec = X.ndim == 1
    Xm = X[:, None] if (vec and left) else (X[None, :] if vec else X)
    k_axis = 0 if left else 1
    if Xm.numblocks[k_axis] > 1:
        Xm = Xm.rechunk({k_axis: -1})
    M = W.shape[0] if left else W.shape[1]
    if left:
        chunks = ((M,), Xm.chunks[1])
        # token=, not name=: dask adds a hash of the arguments. With one fixed name every
        # product's blocks had the same keys, and the scheduler could hand back another
        # product's block (a 500 x 64 result for 500 x 256, once, in a README run).
        Y = da.map_blocks(_left_block, Xm, W.ref, n_threads, method, chunks=chunks,
                          dtype=dtype, token="wsesparse-W@X")
        return Y[:, 0] if vec else Y
    chunks = (Xm.chunks[0], (M,))
    Y = da.map_blocks(_right_block, Xm, W.ref, n_threads, method, chunks=chunks,
                      dtype=dtype, token="wsesparse-X@W")
    return Y[0, :] if vec else Y


# ------------------------------------------------------------------ TLR-MVM batches

@dataclass(frozen=True)
class _TLRRef:
    """A TLR matrix living on a worker (future) or as one graph key (delayed)."""

    ref: Any
    shape: tuple[int, int]
    dtype: np.dtype


def scatter_tlr(matrices: Sequence[TLRMatrix], client=None) -> list:
    """Place TLR matrices on the workers once, spread over them (not broadcast).

    Parameters
    ----------
    matrices : sequence of TLRMatrix
        E.g. the frequency slices of a seismic data set.
    client : distributed.Client or None
        None: the default client (one must be active).

    Returns
    -------
    list of distributed.Future
        One future per matrix, for :func:`tlr_matvec_batch`; the matrices stay
        in worker memory while the futures live.

    Examples
    --------
    >>> import numpy as np, dask
    >>> from distributed import Client
    >>> from wsesparse import TLRMatrix
    >>> from wsesparse.datasets import seismic_slice
    >>> Ts = [TLRMatrix.from_dense(seismic_slice(nx=8, ny=8, frequency=f), nb=32, tol=1e-3)
    ...       for f in (5.0, 9.0)]
    >>> client = Client(processes=False, n_workers=1, dashboard_address=":0")  # LocalCluster
    >>> futs = scatter_tlr(Ts)                     # the default client: the one above
    >>> xs = np.ones((2, 64), dtype=np.complex64)
    >>> ys = dask.compute(*tlr_matvec_batch(futs, xs))
    >>> bool(np.allclose(ys[1], Ts[1] @ xs[1]))
    True
    >>> client.close()
    """
    if isinstance(matrices, TLRMatrix) or not isinstance(matrices, Iterable):
        raise TypeError(f"matrices must be a sequence of TLRMatrix, got {describe(matrices)}")
    matrices = list(matrices)
    for k, T in enumerate(matrices):
        if not isinstance(T, TLRMatrix):
            raise TypeError(f"matrices[{k}] must be a TLRMatrix, got {describe(T)}")
    c = _active_client(client)
    if c is None:
        raise ValueError("scatter_tlr needs a distributed client: pass client= or create one "
                         "(distributed.Client(...)) first")
    if getattr(c, "asynchronous", False):
        raise TypeError("scatter_tlr takes a synchronous distributed.Client; this one is "
                        "asynchronous")
    if matrices and not c.scheduler_info().get("workers"):
        # (its scatter blocked 30 s, then failed: a review)
        raise ValueError("scatter_tlr: the client has no workers yet; start some, or wait "
                         "for them (client.wait_for_workers(1))")
    # (an empty list: distributed's scatter failed inside the scheduler)
    return c.scatter(matrices, hash=False) if matrices else []


def _tlr_meta(T: TLRMatrix) -> tuple[tuple[int, int], str] | str:
    """Shape and dtype of the TLRMatrix a future holds, or the description of what it
    holds instead (the TypeError is raised where the product is built)."""
    if not isinstance(T, TLRMatrix):
        return f"{describe(T)} ({type(T).__name__})"
    return T.shape, T.dtype.str


def _tlr_refs(mats: list) -> list[_TLRRef]:
    """The graph references of ``matrices``: TLRMatrix objects as delayed keys, futures
    with their shapes and dtypes fetched from the workers in one gather per client (one
    round trip per slice took 2.1 s for 200 slices)."""
    metas = {}
    for client in {id(T.client): T.client for T in mats if _is_future(T)}.values():
        ks = [k for k, T in enumerate(mats) if _is_future(T) and T.client is client]
        got = client.gather([client.submit(_tlr_meta, mats[k], pure=False) for k in ks])
        metas.update(zip(ks, got))
    refs = []
    for k, T in enumerate(mats):
        if isinstance(T, TLRMatrix):
            key = f"wsesparse-tlr-{dask.base.tokenize(T)}"
            refs.append(_TLRRef(dask.delayed(T, pure=True, name=key), T.shape, T.dtype))
        elif k in metas:
            if isinstance(metas[k], str):
                raise TypeError(f"matrices[{k}] must be a TLRMatrix or a distributed.Future "
                                f"of one, got a Future of {metas[k]}")
            shape, dt = metas[k]
            refs.append(_TLRRef(T, tuple(shape), np.dtype(dt)))
        else:
            raise TypeError(f"matrices[{k}] must be a TLRMatrix or a distributed.Future of "
                            f"one, got {describe(T)} ({type(T).__name__})")
    return refs


def _tlr_task(T: TLRMatrix, x, adjoint: bool, n_threads) -> np.ndarray:
    """One slice's product (runs on a worker)."""
    if not isinstance(T, TLRMatrix):
        raise TypeError(f"expected a TLRMatrix on the worker, got {type(T).__name__}")
    return T.rmatvec(x, n_threads=n_threads) if adjoint else T.matvec(x, n_threads=n_threads)


def tlr_matvec_batch(matrices: Sequence, xs, *, adjoint: bool = False,
                     n_threads: int | None = 1) -> list[da.Array]:
    """``[T_f @ x_f for f]`` with one task per slice, as lazy dask arrays.

    Parameters
    ----------
    matrices : sequence of TLRMatrix or distributed.Future
        The slices; futures (from :func:`scatter_tlr`) keep each matrix on one
        worker across many calls, TLRMatrix objects become one graph key each.
        A :class:`wsesparse.TLRBatch` works too.
    xs : sequence of arrays, or an array of shape (F, n) or (F, n, s)
        One right-hand side (vector or block of vectors) per slice; numpy or
        dask arrays.
    adjoint : bool
        Apply ``T_f.H`` instead (``rmatvec``).
    n_threads : int or None, default 1
        Kernel threads per task.

    Returns
    -------
    list of dask.array.Array
        One lazy product per slice; ``dask.compute(*ys)`` runs them together.

    Examples
    --------
    >>> import numpy as np, dask
    >>> from wsesparse import TLRMatrix
    >>> from wsesparse.dask import tlr_matvec_batch
    >>> from wsesparse.datasets import seismic_slice
    >>> Ts = [TLRMatrix.from_dense(seismic_slice(nx=8, ny=8, frequency=f), nb=32, tol=1e-3)
    ...       for f in (5.0, 9.0)]
    >>> xs = np.ones((2, 64), dtype=np.complex64)
    >>> ys = dask.compute(*tlr_matvec_batch(Ts, xs))
    >>> bool(np.allclose(ys[1], Ts[1] @ xs[1]))
    True
    """
    n_threads = _check_threads(n_threads)
    mats = getattr(matrices, "matrices", matrices)
    if isinstance(mats, TLRMatrix) or not isinstance(mats, Iterable):
        raise TypeError("matrices must be a sequence of TLRMatrix or of futures of them (or a "
                        f"TLRBatch), got {describe(matrices)} ({type(matrices).__name__})")
    mats = list(mats)
    if isinstance(xs, (np.ndarray, da.Array)):
        if xs.ndim not in (2, 3):
            raise ValueError(f"xs as one array must have shape (F, n) or (F, n, s), "
                             f"got {describe(xs)}")
        if np.isnan(xs.shape[0]):
            raise ValueError("xs has an unknown number of slices (dask chunk sizes); call "
                             "xs.compute_chunk_sizes() first")
        xs = [xs[f] for f in range(xs.shape[0])]
    elif isinstance(xs, Iterable) and not isinstance(xs, (str, bytes)):
        xs = list(xs)
    else:
        raise TypeError("xs must be a sequence of one array per matrix, or an array of shape "
                        f"(F, n) or (F, n, s), got {describe(xs)} ({type(xs).__name__})")
    if len(xs) != len(mats):
        raise ValueError(f"xs has {len(xs)} right-hand sides for {len(mats)} matrices")
    out = []
    for f, (ref, x) in enumerate(zip(_tlr_refs(mats), xs)):
        m, n = ref.shape
        n_in, n_out = (m, n) if adjoint else (n, m)
        x = x if isinstance(x, da.Array) else np.asarray(x)
        if x.ndim not in (1, 2) or x.shape[0] != n_in:
            op = "T.H" if adjoint else "T"
            raise ValueError(f"xs[{f}] has shape {x.shape} but matrices[{f}] ({op}) needs "
                             f"{n_in} rows (matrix shape {ref.shape})")
        if x.dtype.kind not in "biufc":
            raise TypeError(f"xs[{f}] must be numeric, got {describe(x)}")
        # The dtype rule of TLRMatrix.matvec (numpy's promotion with T's dtype, then a kernel dtype).
        rt = kernel_dtype(np.result_type(ref.dtype, x.dtype), f"xs[{f}]")
        shape = (n_out,) if x.ndim == 1 else (n_out, x.shape[1])
        # (every argument in the key: equal keys must mean equal tasks)
        token = dask.base.tokenize(ref.ref, x, adjoint, n_threads)
        task = dask.delayed(_tlr_task, pure=True)(ref.ref, x, adjoint, n_threads,
                                                  dask_key_name=f"wsesparse-tlrmvm-{f}-{token}")
        out.append(da.from_delayed(task, shape, dtype=rt))
    return out
