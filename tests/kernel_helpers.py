"""Operands for the tests of the compiled kernels (tests/kernels/): rows of every length,
long CSR structures, copies with one bad index, unsorted rows with duplicates."""

import numpy as np
import scipy.sparse as sp


DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def rows_of_every_length(max_len: int, n_cols: int, dtype, itype, seed=0) -> sp.csr_array:
    """One row of each length 0..max_len (the SpMV / tile code switches on length)."""
    rng = np.random.default_rng(seed)
    lengths = np.arange(max_len + 1)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    indices = np.concatenate([rng.choice(n_cols, size=n, replace=False) for n in lengths])
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.standard_normal(indptr[-1]).astype(dtype)
    return sp.csr_array((data, indices.astype(itype), indptr), shape=(len(lengths), n_cols))


def long_csr(dtype, itype, n_rows=300, per_row=20, n_cols=50, seed=0) -> sp.csr_array:
    """More nonzeros than one checked block (2048), rows of several lengths."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 2 * per_row, size=n_rows)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    indices = rng.integers(0, n_cols, size=indptr[-1]).astype(itype)
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    return sp.csr_array((data, indices, indptr), shape=(n_rows, n_cols))


def with_a_bad_index(A: sp.csr_array, n_cols: int = 50):
    """Copies of ``A`` with one column index out of range (>= n_cols or negative), at
    the start, the middle and the end of the stored entries."""
    nnz = A.nnz
    for pos in (0, 1, nnz // 3, nnz // 2, nnz - 2, nnz - 1):
        for bad in (n_cols, -1, 10**6):
            B = A.copy()
            B.indices[pos] = bad
            yield B


def with_duplicates(A: sp.csr_array) -> sp.csr_array:
    """``A`` with every row's entries reversed (unsorted) and its first entry stored twice."""
    rows, data, cols = [], [], []
    for i in range(A.shape[0]):
        lo, hi = A.indptr[i], A.indptr[i + 1]
        c, d = A.indices[lo:hi][::-1], A.data[lo:hi][::-1]
        c, d = np.concatenate([c, c[:1]]), np.concatenate([d, d[:1]])
        cols.append(c), data.append(d), rows.append(len(c))
    indptr = np.concatenate([[0], np.cumsum(rows)]).astype(A.indptr.dtype)
    return sp.csr_array((np.concatenate(data), np.concatenate(cols).astype(A.indices.dtype),
                         indptr), shape=A.shape)
