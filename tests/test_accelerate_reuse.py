"""``wsesparse.accelerated(reuse=True)``: prepared operands kept for scipy matrices.

Products are compared with scipy's (the switch off) to rounding; which operand a product
used is seen through a spy on ``wsesparse.accelerate.sparse_matmul`` (a ``CSR`` where a
prepared one was reused, the scipy matrix for a one-shot product).
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from matmul_helpers import random_dense

import wsesparse
from wsesparse import CSR, _reuse, accelerate

CLASSES = (sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.csc_array)
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


@pytest.fixture(autouse=True)
def _nothing_kept(monkeypatch):
    """(and the small matrices of these tests reused: MIN_NNZ 1)"""
    monkeypatch.setattr(_reuse, "MIN_NNZ", 1)
    assert not accelerate.is_enabled() and _reuse.n_entries() == 0
    yield
    accelerate.disable()
    assert not accelerate.is_enabled()
    assert _reuse.n_entries() == 0


@pytest.fixture
def spy(monkeypatch):
    """The type of the operand of each product the hooks send to ``sparse_matmul``."""
    calls = []
    real = accelerate.sparse_matmul

    def counting(A, B, **kw):
        calls.append(type(A))
        return real(A, B, **kw)

    monkeypatch.setattr(accelerate, "sparse_matmul", counting)
    return calls


def _matrix(cls, dtype, shape=(37, 29), seed=0, itype=np.int32):
    rng = np.random.default_rng(seed)
    A = sp.random(*shape, density=0.2, format="csr", random_state=rng)
    data = A.data + (1j * rng.standard_normal(A.nnz) if np.dtype(dtype).kind == "c" else 0)
    A = sp.csr_matrix((data.astype(dtype), A.indices.astype(itype), A.indptr.astype(itype)),
                      shape=shape)
    return cls(A)


def _vector(shape, dtype, seed=1):
    return random_dense(np.random.default_rng(seed), shape, dtype)


def _close(got, want, dtype):
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    rtol = 1e-4 if np.dtype(dtype).itemsize * (2 if np.dtype(dtype).kind != "c" else 1) <= 8 \
        else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_products_reuse_a_prepared_operand_from_the_second_on(cls, dtype, spy):
    A = _matrix(cls, dtype)
    x, X = _vector(29, dtype), _vector((29, 5), dtype)
    y, Y = _vector(37, dtype), _vector((3, 37), dtype)
    products = (lambda: A @ x, lambda: A @ X, lambda: A.dot(x), lambda: y @ A,
                lambda: Y @ A, lambda: A.T @ y, lambda: A.conj().T @ y)
    want = [f() for f in products]
    with wsesparse.accelerated(reuse=True):
        for _ in range(3):
            for f, w in zip(products, want):
                _close(f(), w, dtype)
    # The first product of A's arrays is one-shot, the others (A.T's too) take the prepared
    # operand; A.conj() has new arrays every time (a copy), so it never repeats.
    assert spy[0] is cls
    assert spy.count(CSR) == 3 * (len(products) - 1) - 1


@pytest.mark.parametrize("itype", (np.int32, np.int64))
@pytest.mark.parametrize("cls", (sp.csr_array, sp.csc_array))
def test_the_prepared_operand_holds_its_own_arrays(itype, cls):
    """A broken promise must never read out of bounds nor mix old and new arrays: the
    prepared operand holds checked copies of all three arrays, not the matrix's."""
    A = _matrix(cls, np.float64, itype=itype)
    x = _vector(29, np.float64)
    with wsesparse.accelerated(reuse=True):
        A @ x
        A @ x
        (entry,) = _reuse._entries.values()
        P = entry.operand
        assert isinstance(P, CSR)
        for name in ("indptr", "indices", "data"):
            assert not np.may_share_memory(getattr(P, name), getattr(A, name)), name


def test_a_broken_promise_gives_old_or_new_values_never_a_crash():
    """The prepared operand holds copies: a matrix changed in place gives the products of
    its old values, or, once a product's sample meets the change, is prepared again (the
    one-shot product first, which checks the indices)."""
    A = _matrix(sp.csr_array, np.float64, shape=(300, 200))
    x = _vector(200, np.float64)
    old = A @ x
    with wsesparse.accelerated(reuse=True):
        A @ x
        A @ x
        A.data *= 2                  # every value: the next product's sample sees it
        for _ in range(3):
            np.testing.assert_allclose(A @ x, 2 * old)
        A.data[7] = 0                # one value: old values until a sample meets it
        for _ in range(3):
            got = A @ x
            assert np.allclose(got, 2 * old) or np.allclose(got, A.toarray() @ x)
        A.indices[5] = 2 ** 31 - 1   # out of range: scipy's own product would crash
        for _ in range(2000):        # (the sample moves: it meets the change)
            try:
                np.testing.assert_allclose(A @ x, got)
            except ValueError as exc:
                assert "corrupt" in str(exc)
                break
        else:
            raise AssertionError("the changed index was never noticed")


def test_arrays_refilled_for_a_new_matrix_are_noticed():
    """A matrix built on buffers that a freed one was built on, refilled (same addresses,
    lengths, shape): its first products were the old matrix's (a review)."""
    rng = np.random.default_rng(5)
    indptr = np.empty(301, np.int32)
    indices = np.empty(3000, np.int32)
    data = np.empty(3000)
    x = _vector(200, np.float64)
    with wsesparse.accelerated(reuse=True):
        for _ in range(4):
            M = sp.random(300, 200, density=0.05, format="csr", random_state=rng)
            M = M[:, :200] if M.nnz == 3000 else sp.csr_array(
                (rng.standard_normal(3000), rng.integers(0, 200, 3000),
                 np.linspace(0, 3000, 301).astype(np.int64)), shape=(300, 200))
            indptr[:], indices[:], data[:] = M.indptr, M.indices, M.data
            A = sp.csr_matrix((data, indices, indptr), shape=(300, 200))
            for _ in range(3):
                np.testing.assert_allclose(A @ x, M @ x, rtol=1e-12, atol=1e-12)
            del A


@pytest.mark.parametrize("cls", (sp.csr_array, sp.csc_array))
@pytest.mark.parametrize("method", ("abs", "max", "count_nonzero", "spsolve"))
def test_scipy_sorting_a_matrix_in_place_leaves_products_right(cls, method):
    """abs(A), A.max(), A.count_nonzero() and spsolve sort a matrix with unsorted indices
    in place (same arrays, same addresses): with the values shared, later products paired
    the old index order with the new value order, off by 4.7 (a review)."""
    S = cls(sp.random(300, 300, density=0.05, random_state=3) + 3 * sp.eye(300))
    indices, data = S.indices.copy(), S.data.copy()
    for a, b in zip(S.indptr[:-1], S.indptr[1:]):    # each row (column) reversed
        indices[a:b], data[a:b] = indices[a:b][::-1], data[a:b][::-1]
    A = cls((data, indices, S.indptr.copy()), shape=S.shape)
    assert not A.has_sorted_indices
    x = _vector(300, np.float64)
    want = (A.toarray() @ x, x @ A.toarray())
    with wsesparse.accelerated(reuse=True):
        for _ in range(3):
            A @ x
            x @ A
        {"abs": lambda: abs(A), "max": A.max, "count_nonzero": A.count_nonzero,
         "spsolve": lambda: spla.spsolve(sp.csc_array(A) if cls is sp.csc_array else A,
                                         x)}[method]()
        for _ in range(2):
            np.testing.assert_allclose(A @ x, want[0], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(x @ A, want[1], rtol=1e-12, atol=1e-12)


def test_new_arrays_are_a_new_matrix_and_the_block_end_drops_everything():
    A = _matrix(sp.csr_array, np.float64)
    x = _vector(29, np.float64)
    with wsesparse.accelerated(reuse=True):
        A @ x
        A @ x
        A.data = A.data * 3          # new values in a new array: takes the old one's place
        np.testing.assert_allclose(A @ x, A.toarray() @ x)
        assert _reuse.n_entries() == 1
    assert _reuse.n_entries() == 0   # (the fixture checks it for every test too)
    A.data[:] = 1                    # changed outside the block: products see it
    with wsesparse.accelerated(reuse=True):
        for _ in range(3):
            np.testing.assert_allclose(A @ x, A.toarray() @ x)


def test_entries_go_with_their_matrix_and_stay_bounded():
    x = _vector(29, np.float64)
    with wsesparse.accelerated(reuse=True):
        A = _matrix(sp.csr_array, np.float64)
        A @ x
        A @ x
        assert _reuse.n_entries() == 1
        del A
        gc.collect()
        assert _reuse.n_entries() == 0
        kept = [_matrix(sp.csr_array, np.float64, seed=s) for s in range(_reuse.MAX_ENTRIES + 5)]
        for B in kept:
            B @ x
            B @ x
        assert _reuse.n_entries() == _reuse.MAX_ENTRIES
        for B in kept[-3:]:           # the most recent ones are still prepared
            assert _reuse.operand(B) is not None


def test_a_thread_s_entries_go_when_its_last_reuse_block_exits():
    """Another thread's open reuse block kept this thread's entries after its block, and a
    matrix changed between two of its blocks (allowed) gave products 23.6 off (a review)."""
    A = _matrix(sp.csr_array, np.float64, shape=(300, 200))
    x = _vector(200, np.float64)
    inside, done = threading.Event(), threading.Event()

    def other():
        with wsesparse.accelerated(reuse=True):
            inside.set()
            done.wait(10)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    try:
        with wsesparse.accelerated(reuse=True):
            for _ in range(3):
                A @ x
            assert _reuse.n_entries() == 1
        assert _reuse.n_entries() == 0
        A.indices[:] = A.indices[::-1].copy() % 200     # changed between two blocks
        A.data *= 2
        with wsesparse.accelerated(reuse=True):
            for _ in range(3):
                np.testing.assert_allclose(A @ x, A.toarray() @ x, rtol=1e-12, atol=1e-12)
                np.testing.assert_allclose(A.T @ (A @ x), A.toarray().T @ (A.toarray() @ x),
                                           rtol=1e-12)
    finally:
        done.set()
        t.join(10)


def test_a_thread_without_the_promise_gets_no_operand():
    A = _matrix(sp.csr_array, np.float64)
    for _ in range(3):
        assert _reuse.operand(A) is None
    assert _reuse.n_entries() == 0


def test_a_matrix_on_the_same_index_arrays_with_new_values_takes_the_old_one_s_place():
    """J = csr_matrix((values, J.indices, J.indptr)) in a Newton loop: the old J's operand
    was kept (its values alive in it), 7.6 MiB a step up to 32 (a review)."""
    A = _matrix(sp.csr_array, np.float64)
    x = _vector(29, np.float64)
    with wsesparse.accelerated(reuse=True):
        for step in range(5):
            J = sp.csr_array((A.data * (step + 1), A.indices, A.indptr), shape=A.shape)
            for _ in range(3):
                np.testing.assert_allclose(J @ x, (step + 1) * (A @ x), rtol=1e-12)
            assert _reuse.n_entries() == 1


def test_reuse_holds_only_in_the_thread_that_promised(spy):
    A = _matrix(sp.csr_array, np.float64)
    x = _vector(29, np.float64)
    inside, go_on = threading.Event(), threading.Event()

    def other():
        with wsesparse.accelerated():
            inside.set()
            go_on.wait(10)
            for _ in range(3):
                A @ x

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    with wsesparse.accelerated(reuse=True):
        go_on.set()
        t.join(10)
        assert spy == [type(A)] * 3        # the other thread: one-shot products only
        A @ x
        A @ x
        assert spy[-1] is CSR
    assert not t.is_alive()


def test_enable_with_reuse_holds_in_every_thread_until_disable(spy):
    A = _matrix(sp.csr_array, np.float64)
    x = _vector(29, np.float64)
    accelerate.enable(reuse=True)
    t = threading.Thread(target=lambda: [A @ x for _ in range(3)])
    t.start()
    t.join(10)
    assert spy[-1] is CSR
    with wsesparse.accelerated():          # a block without reuse keeps the promise on
        pass
    assert _reuse.n_entries() == 1
    accelerate.disable()
    assert _reuse.n_entries() == 0


@pytest.mark.parametrize("reuse", (1, "yes", None, np.array([True])))
def test_reuse_must_be_a_bool(reuse):
    with pytest.raises(TypeError, match="reuse must be True or False"):
        with wsesparse.accelerated(reuse=reuse):
            pass
    with pytest.raises(TypeError, match="reuse must be True or False"):
        accelerate.enable(reuse=reuse)
    assert not accelerate.is_enabled()


@pytest.mark.parametrize("cls", (sp.csr_array, sp.csc_array))
@pytest.mark.parametrize("fault", ("index", "float indices", "short indptr"))
def test_a_corrupt_matrix_raises_as_without_reuse(cls, fault):
    A = _matrix(cls, np.float64)
    x = _vector(A.shape[1], np.float64)
    if fault == "index":
        A.indices[3] = 10 ** 4
    elif fault == "float indices":
        A.indices = A.indices.astype(np.float64)
    else:
        A.indptr = A.indptr[:-2]
    with wsesparse.accelerated():
        with pytest.raises(ValueError) as plain:
            A @ x
    with wsesparse.accelerated(reuse=True):
        for _ in range(3):   # one-shot first, then the preparation: the same error
            with pytest.raises(ValueError) as reused:
                A @ x
            assert str(reused.value) == str(plain.value)


def test_cg_with_reuse_matches_scipy():
    from wsesparse.bench.workflows import poisson_2d
    A = poisson_2d(30)
    b = np.ones(A.shape[0])
    want = spla.cg(A, b, rtol=1e-10, maxiter=50)[0]
    with wsesparse.accelerated(reuse=True):
        got = spla.cg(A, b, rtol=1e-10, maxiter=50)[0]
        assert _reuse.n_entries() == 1
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


def test_small_matrices_stay_one_shot(monkeypatch, spy):
    """Below MIN_NNZ stored entries the bookkeeping costs what preparing saves."""
    monkeypatch.setattr(_reuse, "MIN_NNZ", 300)
    small = _matrix(sp.csr_array, np.float64)                    # 37 x 29: 215 entries
    big = _matrix(sp.csr_array, np.float64, shape=(60, 40))      # 480
    assert small.nnz < 300 <= big.nnz
    with wsesparse.accelerated(reuse=True):
        for _ in range(3):
            small @ _vector(29, np.float64)
            big @ _vector(40, np.float64)
    assert spy == [sp.csr_array, sp.csr_array] + [sp.csr_array, CSR] * 2


@pytest.mark.parametrize("where", (0, 50, 98, 99))
def test_a_change_anywhere_is_noticed(where):
    """The sample's windows stopped before the last entry: a change of data[nnz - 1] was
    never noticed (a review); windows now wrap around the end."""
    A = sp.csr_array((np.arange(1.0, 101.0), np.arange(100), np.arange(0, 101, 10)),
                     shape=(10, 100))             # 10 entries a row, 100 in all
    x = _vector(100, np.float64)
    with wsesparse.accelerated(reuse=True):
        A @ x
        A @ x
        A.data[where] += 50.0                  # a broken promise, one entry
        want = A.toarray() @ x
        for _ in range(1000):
            if np.allclose(A @ x, want):
                break
        else:
            raise AssertionError(f"data[{where}] changed, never noticed")


def test_a_new_thread_with_a_dead_thread_s_ident_holds_no_promise():
    """A thread that ended with its reuse block open (in a suspended generator) left its
    ident among the holders; a new thread given the same ident (they are recycled) took
    its promise and its prepared operands: 50.0 off after its own, allowed change."""
    A = _matrix(sp.csr_array, np.float64, shape=(300, 200))
    x = _vector(200, np.float64)
    kept = []

    def with_an_open_block():
        def gen():
            with wsesparse.accelerated(reuse=True):
                A @ x
                A @ x
                yield
        g = gen()
        next(g)
        kept.append(g)

    t = threading.Thread(target=with_an_open_block)
    t.start()
    t.join()
    result = {}

    def plain():
        result["ident"] = threading.get_ident()
        A.data[100] += 50.0                # no promise made here
        want = A.toarray() @ x
        with wsesparse.accelerated():
            result["right"] = all(np.allclose(A @ x, want) for _ in range(5))

    try:
        for _ in range(20):
            t2 = threading.Thread(target=plain)
            t2.start()
            t2.join()
            assert result["right"]
            if result["ident"] == t.ident:
                break
    finally:
        kept[0].close()                    # (the block closes, from this thread)


def test_arrays_changed_while_copied_are_not_prepared(monkeypatch, spy):
    """scipy sorting the matrix in place in another thread while the operand was copied
    paired sorted indices with unsorted values (a review): the copy is compared with the
    arrays after it is made, and the product is one-shot where they differ."""
    A = _matrix(sp.csr_array, np.float64)
    x = _vector(29, np.float64)
    real = CSR.from_arrays

    def changing(*args, **kw):
        P = real(*args, **kw)
        A.data[3] += 1.0                   # (the change lands after the copy)
        return P

    monkeypatch.setattr(CSR, "from_arrays", changing)
    with wsesparse.accelerated(reuse=True):
        for _ in range(3):
            np.testing.assert_allclose(A @ x, A.toarray() @ x, rtol=1e-12)
    assert CSR not in spy


@pytest.mark.parametrize("end", (np.inf, np.nan))
def test_a_float_indptr_raises_as_without_reuse(end):
    """A float indptr ending in inf escaped as OverflowError from the preparation."""
    A = _matrix(sp.csr_array, np.float64)
    x = _vector(29, np.float64)
    ptr = A.indptr.astype(np.float64)
    ptr[-1] = end
    A.indptr = ptr
    with wsesparse.accelerated():
        with pytest.raises(ValueError) as plain:
            A @ x
    with wsesparse.accelerated(reuse=True):
        for _ in range(3):
            with pytest.raises(ValueError) as reused:
                A @ x
            assert str(reused.value) == str(plain.value)
