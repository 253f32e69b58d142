"""Balancers: which physical row each input feature lives on.

``Y = W @ X`` is invariant under permuting the input features (columns of W
together with rows of X), so the mapping is free to choose. Unstructured
sparsity has hot and cold features; a row holding hot ones gets more AXPYs and
everyone else waits for it (the tail-worker effect). The published scheme sorts
features by nonzero count and deals them round-robin to rows.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from wsesparse._checks import check_int, describe
from wsesparse.wafer._compare import fields_equal

BALANCERS = ("identity", "contiguous", "round_robin", "serpentine", "greedy")


@dataclass(frozen=True)
class Assignment:
    """Feature-to-row mapping and its work statistics.

    Attributes
    ----------
    method : str
        Balancer that produced it.
    row_of_feature : ndarray of int32, shape (K,)
        Physical row of each input feature.
    slot_of_feature : ndarray of int32, shape (K,)
        Position of the feature inside its row's input tile.
    features_per_row : ndarray of int64, shape (rows,)
    row_nnz : ndarray of int64, shape (rows,)
        Nonzeros (AXPYs) each row receives over the whole matrix.
    """

    method: str
    row_of_feature: np.ndarray
    slot_of_feature: np.ndarray
    features_per_row: np.ndarray
    row_nnz: np.ndarray

    __eq__ = fields_equal  # (arrays compared by value)

    @property
    def max_over_mean(self) -> float:
        """Max / mean nonzeros per row (1.0 is perfectly even)."""
        mean = self.row_nnz.mean()
        return float(self.row_nnz.max() / mean) if mean > 0 else 1.0

    @property
    def efficiency(self) -> float:
        """``nnz_total / (rows * nnz_max)``: the fraction of AXPY slots doing work."""
        mx = self.row_nnz.max()
        return float(self.row_nnz.sum() / (self.row_nnz.size * mx)) if mx > 0 else 1.0


def check_method(method, name: str = "method", other: str = "") -> str:
    """``method`` if it names a balancer, else ValueError naming the argument ``name`` (and
    ``other`` accepted forms, e.g. "an Assignment or ").

    Examples
    --------
    >>> check_method("greedy")
    'greedy'
    >>> check_method("rr", "balance")
    Traceback (most recent call last):
    ValueError: balance must be one of ('identity', 'contiguous', 'round_robin', \
'serpentine', 'greedy'), got 'rr'
    """
    if not isinstance(method, str) or method not in BALANCERS:
        raise ValueError(f"{name} must be {other}one of {BALANCERS}, got {method!r}")
    return method


def check_assignment(assign: Assignment, feature_nnz: np.ndarray, rows: int,
                     name: str = "balance") -> Assignment:
    """A hand-built ``Assignment`` checked against the features' nonzeros and the grid's
    rows (the simulator indexes rows and slots with it unchecked), as a fresh one with
    int32 / int64 arrays; ValueError naming ``name`` otherwise.

    Every feature sits on a row in ``[0, rows)`` at a slot below that row's feature count,
    no two features share a (row, slot), and ``features_per_row`` and ``row_nnz`` are the
    counts the rows get.

    Examples
    --------
    >>> a = balance([3, 1, 2], rows=2)
    >>> check_assignment(a, np.array([3, 1, 2]), 2).row_nnz.tolist()
    [4, 2]
    >>> bad = Assignment("x", np.array([0, 2, 1], np.int32), a.slot_of_feature,
    ...                  a.features_per_row, a.row_nnz)
    >>> check_assignment(bad, np.array([3, 1, 2]), 2)
    Traceback (most recent call last):
    ValueError: balance assigns a feature to a row outside [0, 2)
    """
    K = len(feature_nnz)
    arrays = []
    for field, size in (("row_of_feature", K), ("slot_of_feature", K),
                        ("features_per_row", rows), ("row_nnz", rows)):
        arr = np.asarray(getattr(assign, field))
        if arr.shape != (size,) or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError(f"{name}.{field} must be {size} integers (W has {K} columns, the "
                             f"machine {rows} rows), got {describe(arr)}")
        arrays.append(arr.astype(np.int64))
    row, slot, per_row, row_nnz = arrays
    if K and (row.min() < 0 or row.max() >= rows):
        raise ValueError(f"{name} assigns a feature to a row outside [0, {rows})")
    if not np.array_equal(per_row, np.bincount(row, minlength=rows)):
        raise ValueError(f"{name}.features_per_row does not count the features of each row")
    if K and (slot.min() < 0 or (slot >= per_row[row]).any()
              or np.unique(row * K + slot).size != K):
        raise ValueError(f"{name}.slot_of_feature must number each row's features 0, 1, ... "
                         "without repeats")
    if not np.array_equal(row_nnz, np.bincount(row, weights=feature_nnz, minlength=rows)):
        raise ValueError(f"{name}.row_nnz does not add up the nonzeros of each row's features")
    return Assignment(assign.method, row.astype(np.int32), slot.astype(np.int32), per_row,
                      row_nnz)


def balance(feature_nnz, rows: int, method: str = "round_robin") -> Assignment:
    """Assign input features to physical rows.

    Parameters
    ----------
    feature_nnz : array_like of int, shape (K,)
        Nonzeros in each input feature (column of W).
    rows : int
        Physical rows of the grid, 1 to 2**20 (as ``Machine.rows``).
    method : {'identity', 'contiguous', 'round_robin', 'serpentine', 'greedy'}
        ``identity``: feature j on row ``j % rows`` (stored order, dealt cyclically);
        ``contiguous``: blocks of ``ceil(K / rows)`` consecutive features per row;
        ``round_robin``: sort by nonzero count (descending, stable) and deal cyclically
        (the published scheme); ``serpentine``: sorted, dealt 0..R-1 then R-1..0 so the
        row that gets the hottest feature of one round gets the coldest of the next; ``greedy``: sorted descending, each feature to the row
        with the fewest nonzeros so far (ties: fewer features, then lower row).

    Returns
    -------
    Assignment

    Examples
    --------
    >>> a = balance([9, 1, 1, 9], rows=2, method="contiguous")
    >>> a.row_nnz.tolist(), a.max_over_mean
    ([10, 10], 1.0)
    >>> balance([9, 9, 1, 1], rows=2, method="contiguous").row_nnz.tolist()
    [18, 2]
    >>> balance([9, 9, 1, 1], rows=2, method="round_robin").row_nnz.tolist()
    [10, 10]
    """
    # (Machine.rows' bound: greedy's heap of one entry per row took minutes and ~100 GB at
    # rows=10**9)
    rows = check_int(rows, "rows", minimum=1, maximum=2**20)
    check_method(method)
    nnz = np.asarray(feature_nnz)
    if nnz.ndim != 1:
        raise ValueError(f"feature_nnz must be 1-D, got shape {nnz.shape}")
    if nnz.size and (nnz.dtype.kind not in "iu"):
        raise TypeError(f"feature_nnz must hold integers, got dtype {nnz.dtype}")
    nnz = nnz.astype(np.int64)
    if nnz.size and nnz.min() < 0:
        raise ValueError("feature_nnz must be >= 0")
    K = nnz.size
    j = np.arange(K, dtype=np.int64)
    if method == "identity":
        row = j % rows
    elif method == "contiguous":
        block = max(1, -(-K // rows))
        row = j // block
    elif method == "round_robin":
        order = np.argsort(-nnz, kind="stable")
        row = np.empty(K, dtype=np.int64)
        row[order] = j % rows
    elif method == "serpentine":
        order = np.argsort(-nnz, kind="stable")
        rnd, pos = np.divmod(j, rows)
        row = np.empty(K, dtype=np.int64)
        row[order] = np.where(rnd % 2 == 0, pos, rows - 1 - pos)
    else:  # greedy (longest-processing-time first)
        order = np.argsort(-nnz, kind="stable")
        row = np.empty(K, dtype=np.int64)
        heap = [(0, 0, r) for r in range(rows)]
        for f in order:
            load, count, r = heapq.heappop(heap)
            row[f] = r
            heapq.heappush(heap, (load + int(nnz[f]), count + 1, r))
    features_per_row = np.bincount(row, minlength=rows).astype(np.int64)
    row_nnz = np.bincount(row, weights=nnz, minlength=rows).astype(np.int64)
    # Slot = rank of the feature among its row's features in index order: the
    # row's input tile stores its features contiguously.
    order = np.lexsort((j, row))
    starts = np.concatenate(([0], np.cumsum(features_per_row)[:-1]))
    slot = np.empty(K, dtype=np.int64)
    slot[order] = np.arange(K) - starts[row[order]]
    return Assignment(method, row.astype(np.int32), slot.astype(np.int32),
                      features_per_row, row_nnz)
