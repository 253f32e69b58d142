"""Work items of the TLR-MVM phases: tiles cut into ranges of about equal bytes.

Each phase of ``_kernels/_tlrmvm.pyx`` runs over the stacked blocks of the tile columns
or tile rows. With few tiles per thread (2499^2 in 256-tiles: 10 per phase) whole tiles
leave threads idle: on 16 threads the longest thread of phase 1 of that operator has 1.79
times the mean work. The items here cut a tile's block into ranges of the dimension whose
elements are independent sums (the outputs of a forward phase, the rows of an adjoint
phase), so the summation of each output element, and so the bits of the product, are the
same for every cut and thread count. The adjoint takes ``tile_items``' ranges of about equal
work; the forward, which pays per item, ``wrap_items``' few cuts where the threads' equal
shares of the work end.
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["FORWARD_CUT_ABOVE", "GRAIN", "PARTS", "imbalance", "queues_by_work", "tile_items",
           "wrap_items"]

PARTS = 4    # items per thread a phase aims for (taken by others from a slow core's queue)
GRAIN = 16   # range boundaries fall on multiples of this many elements (whole vectors)
# The forward kernel pays per row of an item (each range of outputs re-walks all the rows of
# the block), so the forward cuts (wrap_items) only where whole tiles would leave the longest
# thread this far above the mean work: the 9801^2 operator's 39 tiles a phase (1.24 on 16
# threads) took 0.96-1.07x the time on 1-2 threads in the 54 items of the cut, 1.04x or more
# in 5 of 6 cases (docs/tuning.md, "Shares of equal work").
FORWARD_CUT_ABOVE = 1.3


def queues_by_work(work: np.ndarray, n_threads: int) -> list[tuple[int, int]]:
    """The kernels' queues of items of ``work`` in order (``ws_part_queues_by_work``,
    _kernels/_part_queues.h): item p goes to the thread whose equal share of the total holds
    the item's middle (by count where there is no work); ``(first, end)`` per thread.

    Examples
    --------
    >>> queues_by_work(np.array([3, 3, 2, 2]), 2)
    [(0, 2), (2, 4)]
    """
    n_parts, n = len(work), max(int(n_threads), 1)
    cum = np.cumsum(np.asarray(work, dtype=np.int64)).tolist()
    total = cum[-1] if n_parts else 0
    if n == 1 or total <= 0:
        return [(n_parts * k // n, n_parts * (k + 1) // n) for k in range(n)]
    queues, p = [], 0
    for k in range(n):
        first = p
        while p < n_parts and (k == n - 1
                               or ((cum[p - 1] if p else 0) + cum[p]) * n < 2 * total * (k + 1)):
            p += 1
        queues.append((first, p))
    return queues


def imbalance(work: np.ndarray, n_threads: int) -> float:
    """Longest thread's work over the mean when the kernels' queues (:func:`queues_by_work`)
    run these items, threads at one speed: each takes its own queue's items in order, then
    what is left of the others' queues, the next queue first (``ws_part_take``); 1.0 for no
    work. (A largest-first schedule over-rated items in order: ``[1] * 8 + [49, 257, 192]``
    on 2 threads runs as 322 against 192, not the 257 each that it counted.)

    Examples
    --------
    >>> imbalance(np.full(10, 5), 16)  # ten equal tiles, sixteen threads
    1.6
    >>> imbalance(np.array([3, 3, 2, 2]), 2)  # (3 + 3 | 2 + 2)
    1.2
    """
    work = np.asarray(work, dtype=np.int64).tolist()
    total = sum(work)
    if n_threads <= 1 or not total > 0:
        return 1.0
    if n_threads >= len(work):  # (every item taken at the start, by its thread or another)
        return float(max(work) / (total / n_threads))
    queues = queues_by_work(work, n_threads)
    nxt, end = [q[0] for q in queues], [q[1] for q in queues]
    n = len(queues)
    at, left = list(range(n)), [n] * n
    ready = [(0, t) for t in range(n)]   # (time, thread): the next thread to take an item
    last = 0
    while ready:
        now, t = heapq.heappop(ready)
        while left[t] and nxt[at[t]] >= end[at[t]]:
            at[t] = at[t] + 1 if at[t] + 1 < n else 0
            left[t] -= 1
        if not left[t]:
            last = max(last, now)
            continue
        p = nxt[at[t]]
        nxt[at[t]] += 1
        heapq.heappush(ready, (now + work[p], t))
    return float(last / (total / n_threads))


def tile_items(split: np.ndarray, other: np.ndarray, n_threads: int, parts: int = PARTS,
               grain: int = GRAIN, cut_above: float = 1.0) -> np.ndarray:
    """Cut each tile's ``split`` dimension into ranges of about equal work.

    Parameters
    ----------
    split : (ntiles,) int array
        Length of the dimension cut, per tile; tiles of length 0 get no item.
    other : (ntiles,) int array
        The other dimension of the tile's block (its work is ``split * max(other, 1)``).
    n_threads : int
        Threads of the product; with one, every tile is one item.
    parts, grain : int
        Items per thread aimed at; range boundaries are multiples of ``grain``.
    cut_above : float
        Cut only where whole tiles give an :func:`imbalance` above this.

    Returns
    -------
    (n_items, 3) int64 array
        Rows ``(tile, start, stop)``, tile by tile, ranges in order and covering
        ``[0, split[tile])``.

    Examples
    --------
    >>> tile_items(np.array([64, 0, 32]), np.array([10, 10, 10]), n_threads=1).tolist()
    [[0, 0, 64], [2, 0, 32]]
    >>> tile_items(np.array([64, 0, 32]), np.array([10, 10, 10]), n_threads=2).tolist()
    [[0, 0, 16], [0, 16, 32], [0, 32, 48], [0, 48, 64], [2, 0, 16], [2, 16, 32]]
    """
    split = np.asarray(split, dtype=np.int64)
    work = split * np.maximum(np.asarray(other, dtype=np.int64), 1)
    cut = n_threads > 1 and imbalance(work[split > 0], n_threads) > cut_above
    target = work.sum() / (n_threads * parts) if cut else np.inf
    rows = []
    for t, (d, c) in enumerate(zip(split.tolist(), work.tolist())):
        if d == 0:
            continue
        n = 1 if not c > target else min(int(np.ceil(c / target)), -(-d // grain))
        cuts = sorted({min(d, int(round(d * k / n / grain)) * grain) for k in range(1, n)} - {0})
        bounds = [0] + [b for b in cuts if b < d] + [d]
        rows += [(t, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def wrap_items(split: np.ndarray, other: np.ndarray, n_threads: int, grain: int = GRAIN,
               cut_above: float = 1.0) -> np.ndarray:
    """Cut the tiles, laid end to end by work, where each of ``n_threads`` equal shares ends.

    McNaughton's wrap-around rule: thread t's share is the work from ``t W / T`` to
    ``(t + 1) W / T`` of the tiles in order, so each thread gets one run of consecutive
    items and a tile is cut at most where a share ends (at most ``n_threads - 1`` cuts in
    all), boundaries rounded to ``grain``. The forward kernel pays per row of an item (each
    range of outputs re-walks all the rows of its block), so it takes these few cuts rather
    than :func:`tile_items`' ranges (docs/tuning.md, "Shares of equal work"). The kernels'
    queues split the items by work the same way (``ws_part_queues_by_work``), so thread t
    takes share t.

    Parameters
    ----------
    split, other : (ntiles,) int arrays
        As in :func:`tile_items`: the dimension cut and the other one (a tile's work is
        ``split * max(other, 1)``); tiles of length 0 get no item.
    n_threads : int
        Threads of the product; with one, every tile is one item.
    grain : int
        Cuts fall on multiples of this; a cut that rounds to a tile's end is dropped.
    cut_above : float
        Cut only where whole tiles give an :func:`imbalance` above this.

    Returns
    -------
    (n_items, 3) int64 array
        Rows ``(tile, start, stop)``, tile by tile, covering ``[0, split[tile])``.

    Examples
    --------
    >>> wrap_items(np.array([64, 64, 64]), np.array([10, 10, 10]), n_threads=2).tolist()
    [[0, 0, 64], [1, 0, 32], [1, 32, 64], [2, 0, 64]]
    >>> wrap_items(np.array([64, 0, 32]), np.array([10, 10, 10]), n_threads=1).tolist()
    [[0, 0, 64], [2, 0, 32]]
    """
    split = np.asarray(split, dtype=np.int64)
    other = np.maximum(np.asarray(other, dtype=np.int64), 1)
    work = split * other
    ends = np.cumsum(work)
    total = int(ends[-1]) if len(ends) else 0
    if n_threads > 1 and imbalance(work[split > 0], n_threads) <= cut_above:
        n_threads = 1
    rows = []
    for t, (d, o, end) in enumerate(zip(split.tolist(), other.tolist(), ends.tolist())):
        if d == 0:
            continue
        begin = end - d * o
        # share ends k W / T inside this tile, in its elements, rounded to the grain
        ks = range(begin * n_threads // total + 1, -(-end * n_threads // total)) \
            if n_threads > 1 else ()
        cuts = sorted({int(round((k * total / n_threads - begin) / o / grain)) * grain
                       for k in ks} - {0})
        bounds = [0] + [c for c in cuts if c < d] + [d]
        rows += [(t, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)
