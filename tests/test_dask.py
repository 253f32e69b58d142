"""wsesparse.dask on a real distributed.LocalCluster (2 worker processes, 1 thread each).

Every product is compared with the single-machine result of
``wsesparse.sparse_matmul`` / ``TLRMatrix.matvec`` on the same numpy data.
"""

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

distributed = pytest.importorskip("distributed")  # dask is an optional extra
da = pytest.importorskip("dask.array")
import cloudpickle  # noqa: E402  (comes with distributed)
import dask  # noqa: E402

from wsesparse import CSR, TLRBatch, sparse_matmul  # noqa: E402
from wsesparse import dask as wd  # noqa: E402
from wsesparse.datasets import seismic_slice  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 1e-5, np.complex64: 1e-5, np.float64: 1e-12, np.complex128: 1e-12}


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _weights(m, k, dtype, density=0.05, seed=0):
    rng = np.random.default_rng(seed)
    W = sp.random(m, k, density=density, format="csr", dtype=np.float64, random_state=rng)
    if np.dtype(dtype).kind == "c":
        W = W + 1j * sp.random(m, k, density=density, format="csr", random_state=rng)
    return sp.csr_array(W.astype(dtype))


def _dense(shape, dtype, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        X = X + 1j * rng.standard_normal(shape)
    return X.astype(dtype)


def _csr_per_worker(client):
    return client.run(lambda dask_worker: sum(isinstance(v, CSR)
                                              for v in dask_worker.data.values()))


# ------------------------------------------------------------------ W @ X

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chunks", [(300, 37), (300, 1000), (100, 64)],
                         ids=["tokens37", "one-chunk", "K-and-tokens"])
def test_w_at_x_matches_single_machine(client, dtype, chunks):
    W = _weights(250, 300, dtype)
    Xn = _dense((300, 203), dtype)
    X = da.from_array(Xn, chunks=chunks)
    Y = wd.sparse_matmul(W, X)
    assert isinstance(Y, da.Array)
    assert Y.shape == (250, 203) and Y.dtype == np.dtype(dtype)
    assert Y.numblocks[0] == 1 and Y.chunks[1] == X.chunks[1]   # token chunks preserved
    got = Y.compute()
    want = sparse_matmul(W, Xn)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


def test_mixed_dtypes_follow_sparse_matmul(client):
    W = _weights(60, 40, np.float32)
    Xn = _dense((40, 50), np.float64)
    Y = wd.sparse_matmul(W, da.from_array(Xn, chunks=(40, 20)))
    assert Y.dtype == sparse_matmul(W, Xn).dtype == np.float64
    np.testing.assert_allclose(Y.compute(), sparse_matmul(W, Xn), rtol=1e-6)


def test_vector_and_csr_and_coo_inputs(client):
    W = _weights(80, 70, np.float64)
    x = _dense((70,), np.float64)
    y = wd.sparse_matmul(CSR(W), da.from_array(x, chunks=20))
    assert y.shape == (80,)
    np.testing.assert_allclose(y.compute(), W @ x, rtol=1e-12, atol=1e-12)
    Xn = _dense((70, 30), np.float64)
    Y = wd.sparse_matmul(W.tocoo(), da.from_array(Xn, chunks=(70, 8)))
    np.testing.assert_allclose(Y.compute(), W @ Xn, rtol=1e-12, atol=1e-12)


def test_weights_broadcast_once_and_reused(client):
    W = _weights(500, 400, np.float64, density=0.1)
    Wd = wd.scatter_weights(W)
    assert distributed.Future is type(Wd.ref) or isinstance(Wd.ref, distributed.Future)
    # broadcast=True: one copy on each of the two workers, before any compute
    assert len(client.who_has(Wd.ref)[Wd.ref.key]) == 2
    Xn = _dense((400, 256), np.float64)
    for chunk in (16, 64):
        Y = wd.sparse_matmul(Wd, da.from_array(Xn, chunks=(400, chunk)), n_threads=1)
        # Not embedded in the tasks: no task of the graph pickles to W's size.
        sizes = [len(cloudpickle.dumps(t)) for k, t in dict(Y.__dask_graph__()).items()
                 if "wsesparse" in str(k)]
        assert len(sizes) == 256 // chunk and max(sizes) < W.data.nbytes / 10
        np.testing.assert_allclose(Y.compute(), W @ Xn, rtol=1e-12, atol=1e-12)
    # still at most one CSR per worker after 20 block tasks (no copy per task); the active
    # memory manager may have dropped the broadcast's second copy meanwhile (it keeps one
    # copy of a key no waiting task needs: see the next test)
    counts = list(_csr_per_worker(client).values())
    assert max(counts) == 1 and len(counts) == 2
    del Wd, Y


def test_products_have_keys_of_their_own(client):
    """Every product's blocks had the keys ('wsesparse-W@X', i, j): a second product of the
    same weights on other chunks reused them, and the scheduler once handed back a 500 x 64
    result for 500 x 256 ("Detected different run_spec for key"). The keys now carry a
    hash of the arguments, and both products compute in one graph."""
    W = _weights(60, 50, np.float64, density=0.2)
    Wd = wd.scatter_weights(W)
    Xn = _dense((50, 32), np.float64)
    Ys = [wd.sparse_matmul(Wd, da.from_array(Xn, chunks=(50, c)), n_threads=1)
          for c in (8, 32)]
    assert Ys[0].name != Ys[1].name and all(Y.name.startswith("wsesparse-W@X-") for Y in Ys)
    for Y in dask.compute(*Ys):
        np.testing.assert_allclose(Y, W @ Xn, rtol=1e-12, atol=1e-12)
    Xl = _dense((4, 60), np.float64)
    Ls = [wd.sparse_matmul(da.from_array(Xl, chunks=(c, 60)), Wd, n_threads=1) for c in (1, 4)]
    assert Ls[0].name != Ls[1].name and all(L.name.startswith("wsesparse-X@W-") for L in Ls)
    for L in dask.compute(*Ls):
        np.testing.assert_allclose(L, Xl @ W, rtol=1e-12, atol=1e-12)


def test_broadcast_stays_without_the_active_memory_manager():
    """With the active memory manager off (as wsesparse.dask's docstring advises for
    keeping W on every worker), both copies survive products and pauses."""
    import time
    with dask.config.set({"distributed.scheduler.active-memory-manager.start": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:  # (":0": the module's cluster holds 8787)
        W = _weights(200, 150, np.float64, density=0.1)
        Wd = wd.scatter_weights(W, client=c)
        Xn = _dense((150, 64), np.float64)
        for _ in range(2):
            Y = wd.sparse_matmul(Wd, da.from_array(Xn, chunks=(150, 16)), n_threads=1)
            np.testing.assert_allclose(Y.compute(), W @ Xn, rtol=1e-12, atol=1e-12)
            time.sleep(2.5)  # longer than the manager's default interval (2 s)
        assert list(_csr_per_worker(c).values()) == [1, 1]


def test_local_scheduler_single_graph_key():
    """Without a client (client=False), W is one key of the graph, not in every task."""
    W = _weights(300, 200, np.float64, density=0.2)
    Xn = _dense((200, 120), np.float64)
    Y = wd.sparse_matmul(W, da.from_array(Xn, chunks=(200, 10)), client=False)
    graph = dict(Y.__dask_graph__())
    big = [k for k, t in graph.items() if len(cloudpickle.dumps(t)) > W.data.nbytes / 2]
    assert len(big) == 1 and "wsesparse-W" in str(big[0])
    got = Y.compute(scheduler="threads")
    np.testing.assert_allclose(got, sparse_matmul(W, Xn), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ X @ W

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chunks", [(41, 90), (200, 30)], ids=["rows41", "rows-and-K"])
def test_x_at_w_matches_single_machine(client, dtype, chunks):
    W = _weights(90, 75, dtype)              # K x M
    Xn = _dense((200, 90), dtype)            # tokens x K
    Z = wd.sparse_matmul(da.from_array(Xn, chunks=chunks), W)
    assert Z.shape == (200, 75) and Z.chunks[0] == da.from_array(Xn, chunks=chunks).chunks[0]
    assert Z.numblocks[1] == 1
    np.testing.assert_allclose(Z.compute(), sparse_matmul(Xn, W), rtol=TOL[dtype],
                               atol=TOL[dtype])


# ------------------------------------------------------------------ errors

def test_errors_are_clear(client):
    W = _weights(30, 20, np.float64)
    X = da.ones((21, 10), chunks=(21, 5))
    with pytest.raises(ValueError, match=r"W @ X: W has shape \(30, 20\).*inner dimensions 20 and 21"):
        wd.sparse_matmul(W, X)
    with pytest.raises(ValueError, match=r"X @ W: W has shape \(30, 20\).*inner dimensions 30 and 20"):
        wd.sparse_matmul(da.ones((4, 20)), W)
    with pytest.raises(TypeError, match="exactly one dask array"):
        wd.sparse_matmul(W, np.ones((20, 3)))
    with pytest.raises(TypeError, match="exactly one dask array"):
        wd.sparse_matmul(da.ones((3, 30)), da.ones((30, 3)))
    with pytest.raises(TypeError, match="A must be a scipy.sparse"):
        wd.sparse_matmul(np.ones((30, 20)), da.ones((20, 3)))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        wd.sparse_matmul(W, da.ones((20, 3, 2)))
    with pytest.raises(ValueError, match=r"A must be a 2-D sparse matrix, got shape \(3,\)"):
        wd.sparse_matmul(sp.coo_array(np.array([1.0, 0.0, 2.0])), da.ones((3, 2)))  # IndexError
    with pytest.raises(ValueError, match="n_threads must be a positive int or None, got 0"):
        wd.sparse_matmul(W, da.ones((20, 3)), n_threads=0)
    with pytest.raises(TypeError, match="n_threads must be a positive int"):
        wd.sparse_matmul(W, da.ones((20, 3)), n_threads=1.5)
    with pytest.raises(ValueError, match="method must be"):
        wd.sparse_matmul(W, da.ones((20, 3)), method="fast")
    with pytest.raises(TypeError, match="W must be a scipy.sparse"):
        wd.scatter_weights(np.eye(3))
    with pytest.raises(TypeError):
        wd.sparse_matmul(W, da.from_array(np.full((20, 3), "a")))
    # (these gave "'bool' object has no attribute 'scatter'" and the like)
    for bad in (True, "tcp://127.0.0.1:8786"):
        with pytest.raises(TypeError, match="client must be a distributed.Client"):
            wd.sparse_matmul(W, da.ones((20, 3)), client=bad)
        with pytest.raises(TypeError, match="client must be a distributed.Client"):
            wd.scatter_weights(W, client=bad)


# ------------------------------------------------------------------ TLR-MVM batches

@pytest.fixture(scope="module")
def tlr_batch():
    As = [seismic_slice(nx=10, ny=10, frequency=f) for f in (4.0, 7.0, 10.0)]
    return TLRBatch.from_dense(As, nb=32, tol=1e-3)


def test_tlr_batch_on_workers(client, tlr_batch):
    xs = _dense((3, 100), np.complex64)
    futs = wd.scatter_tlr(tlr_batch.matrices)
    assert len(futs) == 3
    # spread over the workers, not copied to all of them
    holders = client.who_has(futs)
    assert all(len(v) == 1 for v in holders.values())
    assert len({w for v in holders.values() for w in v}) == 2
    ys = wd.tlr_matvec_batch(futs, xs)
    assert [y.shape for y in ys] == [(100,)] * 3 and ys[0].dtype == np.complex64
    got = dask.compute(*ys)
    want = tlr_batch.matvec(list(xs), n_threads=1)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # adjoint, several right-hand sides, plain TLRMatrix objects
    Ys = _dense((3, 100, 4), np.complex128)
    got = dask.compute(*wd.tlr_matvec_batch(tlr_batch, Ys, adjoint=True))
    for T, g, y in zip(tlr_batch.matrices, got, Ys):
        assert g.shape == (100, 4) and g.dtype == np.complex128
        np.testing.assert_allclose(g, T.rmatvec(y), rtol=1e-10, atol=1e-10)


def test_tlr_batch_errors(client, tlr_batch):
    with pytest.raises(ValueError, match="xs has 2 right-hand sides for 3 matrices"):
        wd.tlr_matvec_batch(tlr_batch, [np.ones(100)] * 2)
    with pytest.raises(ValueError, match=r"xs\[1\] has shape \(99,\)"):
        wd.tlr_matvec_batch(tlr_batch, [np.ones(100), np.ones(99), np.ones(100)])
    with pytest.raises(TypeError, match=r"matrices\[0\] must be a TLRMatrix"):
        wd.tlr_matvec_batch([np.eye(3)], [np.ones(3)])
    with pytest.raises(TypeError, match=r"matrices\[1\] must be a TLRMatrix"):
        wd.scatter_tlr([tlr_batch[0], "x"])
    # (a single matrix said "'TLRMatrix' object is not iterable"; [] failed inside the
    # scheduler)
    with pytest.raises(TypeError, match="matrices must be a sequence of TLRMatrix, got TLR"):
        wd.scatter_tlr(tlr_batch[0])
    assert wd.scatter_tlr([]) == [] and wd.scatter_tlr(iter([])) == []
    # A future of something else failed only when computed (a review found it)
    with pytest.raises(TypeError, match=r"matrices\[0\] must be .* Future of .*ndarray"):
        wd.tlr_matvec_batch([client.scatter(np.eye(3))], [np.ones(3)])
    # (bare Python errors naming nothing, and a late one for n_threads: a review)
    for bad in (None, tlr_batch[0]):
        with pytest.raises(TypeError, match="matrices must be a sequence of TLRMatrix or of"):
            wd.tlr_matvec_batch(bad, [np.ones(100)])
    with pytest.raises(TypeError, match="xs must be a sequence of one array per matrix"):
        wd.tlr_matvec_batch(tlr_batch, 3.0)
    xs = da.ones((3, 100), chunks=(1, 100))
    with pytest.raises(ValueError, match="xs has an unknown number of slices"):
        wd.tlr_matvec_batch(tlr_batch, xs[xs[:, 0] > 0])
    with pytest.raises(ValueError, match="n_threads must be a positive int or None, below"):
        wd.tlr_matvec_batch(tlr_batch, [np.ones(100)] * 3, n_threads=2 ** 31)
    with pytest.raises(ValueError, match="n_threads must be a positive int or None, below"):
        wd.sparse_matmul(_weights(10, 100, np.float64), da.ones((100, 4)), n_threads=2 ** 31,
                         client=False)
    # (a worker's own cap, 4 threads per core, is the worker's: not checked on the client)
    wd.sparse_matmul(_weights(10, 100, np.float64), da.ones((100, 4)), n_threads=10 ** 6,
                     client=False)


def test_tlr_task_keys_include_the_thread_count(tlr_batch):
    """The key left out n_threads: two products that differ only there shared a key (a
    wrong result as soon as thread counts change results, as a fixed name once did)."""
    xs = [np.ones(100, np.complex64)] * 3
    one = wd.tlr_matvec_batch(tlr_batch, xs, n_threads=1)
    two = wd.tlr_matvec_batch(tlr_batch, xs, n_threads=2)
    assert {y.name for y in one}.isdisjoint(y.name for y in two)
    assert [y.name for y in one] == [y.name for y in wd.tlr_matvec_batch(tlr_batch, xs,
                                                                         n_threads=1)]


# ------------------------------------------------------------------ optional import

def test_core_package_never_imports_dask():
    code = ("import sys, wsesparse, wsesparse.wafer, wsesparse.tlr, wsesparse.cli;"
            "assert 'dask' not in sys.modules and 'distributed' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_clear_import_error_without_dask():
    code = ("import sys; sys.modules['dask'] = None; sys.modules['dask.array'] = None\n"
            "try:\n    import wsesparse.dask\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert "pip install 'wsesparse[dask]'" in out


def test_used_weights_keep_their_key_and_size():
    """A CSR or TLRMatrix used once (dense copy, transposes, cast bases cached) was pickled
    with its caches: shipped to workers at 67x its size and hashed to another key, so one
    graph could carry the same weights twice."""
    import pickle

    from wsesparse import CSR, TLRMatrix, sparse_matmul
    P = CSR(_weights(200, 150, np.float32))
    key, size = dask.base.tokenize(P), len(pickle.dumps(P))
    sparse_matmul(P, np.ones((150, 64)), method="dense")
    sparse_matmul(np.ones((4, 200)), P)
    assert (dask.base.tokenize(P), len(pickle.dumps(P))) == (key, size)
    T = TLRMatrix.from_dense(seismic_slice(nx=8, ny=8), nb=32, tol=1e-3)
    key = dask.base.tokenize(T)
    T @ np.ones(64, np.complex128)
    assert dask.base.tokenize(T) == key


def test_a_client_without_workers_yet_builds_at_once():
    """A client whose cluster has no workers yet (adaptive at zero, workers starting): the
    scatter of W blocked 30 s, then failed (a review). W now travels in the graph, and the
    product computes once a worker is there; scatter_tlr says what is missing."""
    import time

    W, X = _weights(40, 30, np.float64), _dense((30, 8), np.float64)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cl, \
            distributed.Client(cl) as c:
        t0 = time.perf_counter()
        Y = wd.sparse_matmul(W, da.from_array(X, chunks=(30, 4)))
        assert time.perf_counter() - t0 < 5
        with pytest.raises(ValueError, match="the client has no workers yet"):
            wd.scatter_tlr(TLRBatch.from_dense([np.eye(8)], nb=4, tol=1e-3).matrices)
        cl.scale(1)
        c.wait_for_workers(1)
        np.testing.assert_allclose(Y.compute(), sparse_matmul(W, X), rtol=1e-12)


def test_an_asynchronous_client():
    """An asynchronous client's scatter returns a coroutine, which the graph held: the
    product failed to serialize, scatter_tlr returned a coroutine (a review). As the default
    client it is not scattered with (W goes into the graph); given, it is a TypeError."""
    import asyncio

    W, X = _weights(40, 30, np.float64), _dense((30, 8), np.float64)

    async def main():
        async with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                            asynchronous=True, dashboard_address=":0") as cl, \
                distributed.Client(cl, asynchronous=True) as c:
            Y = await c.compute(wd.sparse_matmul(W, da.from_array(X, chunks=(30, 4))))
            np.testing.assert_allclose(Y, sparse_matmul(W, X), rtol=1e-12)
            with pytest.raises(TypeError, match="takes a synchronous distributed.Client"):
                wd.scatter_weights(W, client=c)
            with pytest.raises(TypeError, match="takes a synchronous distributed.Client"):
                wd.scatter_tlr(TLRBatch.from_dense([np.eye(8)], nb=4, tol=1e-3).matrices)

    asyncio.run(main())
