"""Workflow benchmarks: the solver loops users run, plain scipy against wsesparse.

A kernel benchmark times one product on a quiet machine; real code calls the product
inside a loop, between numpy vector operations (dot products, axpys) that run on BLAS
threads of their own. Each workflow here runs a fixed number of iterations of a scipy
routine on a generated problem, once with the scipy matrix and once with the product
routed through wsesparse, and reports both times and how far the answers differ:

* ``cg`` and ``minres``: a 2-D Poisson matrix (5 nonzeros per row);
* ``eigsh``: the Laplacian of a random graph (about ``degree`` edges per node);
* ``lsqr``: a rectangular sparse least-squares system;
* ``logreg``: scikit-learn ``LogisticRegression`` fit and predict on TF-IDF-like features
  (left out when scikit-learn is not installed).

"accelerated" is the unmodified call on the scipy matrix inside ``with
wsesparse.accelerated():`` (every product a checked one-shot ``sparse_matmul``; BLAS's
parallel calls on the kernels' threads, or BLAS limited to one thread where a library
cannot do that); "reuse" is the same call inside ``wsesparse.accelerated(reuse=True)``
(the second product of a matrix prepares a ``CSR`` from it, later ones reuse that; the
block, and so the preparation, is part of each timed run); "CSR" hands the prepared
operand ``wsesparse.CSR`` (a LinearOperator) to the routine inside ``accelerated()``, where
the routine takes one (not scikit-learn). "linalg" is ``wsesparse.linalg``'s solver of the
same name (cg, minres) on the scipy matrix: scipy's algorithm with its vector work on the
kernels' threads too (no block). "1-BLAS" is plain scipy with its BLAS limited to
one thread (threadpoolctl) and no product routed: the part of the speed-up that the
switch's BLAS limit alone would give.

:func:`cg_product_in_loop` times cg's product itself: inside the loop (between cg's vector
operations) and alone (the same product back to back).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from wsesparse._checks import check_int, check_real


def poisson_2d(g: int) -> sp.csr_array:
    """The 5-point Laplacian on a ``g`` x ``g`` grid (``g**2`` unknowns), float64 CSR.

    Examples
    --------
    >>> A = poisson_2d(3)
    >>> A.shape, A.nnz, float(A.sum())
    ((9, 9), 33, 12.0)
    """
    g = check_int(g, "g", minimum=1)
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(g, g))
    I = sp.eye_array(g)
    A = (sp.kron(I, T) + sp.kron(T, I)).tocsr()
    A.eliminate_zeros()  # (the kron of DIA arrays stores their padding zeros)
    return A


def graph_laplacian(n_nodes: int, degree: int, seed: int = 0) -> sp.csr_array:
    """Laplacian ``D - W`` of a random undirected graph with about ``degree`` edges per node.

    Examples
    --------
    >>> L = graph_laplacian(100, 6)
    >>> L.shape, bool(abs(L.sum(axis=1)).max() < 1e-12)
    ((100, 100), True)
    """
    n_nodes = check_int(n_nodes, "n_nodes", minimum=2)
    degree = check_int(degree, "degree", minimum=1)
    rng = np.random.default_rng(seed)
    m = n_nodes * degree // 2
    rows = rng.integers(0, n_nodes, m)
    cols = rng.integers(0, n_nodes, m)
    keep = rows != cols
    W = sp.coo_array((np.ones(int(keep.sum())), (rows[keep], cols[keep])),
                     shape=(n_nodes, n_nodes)).tocsr()
    W = W + W.T
    return (sp.diags_array(np.asarray(W.sum(axis=1)).ravel()) - W).tocsr()


def rectangular_system(m: int, n: int, per_row: int, seed: int = 0) -> sp.csr_array:
    """An ``m`` x ``n`` sparse matrix with ``per_row`` random entries per row plus the
    diagonal of its top n x n block (full column rank), float64 CSR: about
    ``per_row + n / m`` stored entries per row."""
    m = check_int(m, "m", minimum=1)
    n = check_int(n, "n", minimum=1, maximum=m)
    per_row = check_int(per_row, "per_row", minimum=0)
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(m), per_row)
    cols = rng.integers(0, n, m * per_row)
    A = sp.coo_array((rng.standard_normal(m * per_row), (rows, cols)), shape=(m, n)).tocsr()
    return (A + sp.eye_array(m, n)).tocsr()


def tfidf_like(n_docs: int, n_terms: int, per_doc: int, seed: int = 0):
    """Rows of l2-normalised TF-IDF-like features (Zipf term frequencies) and labels."""
    n_docs = check_int(n_docs, "n_docs", minimum=2)
    n_terms = check_int(n_terms, "n_terms", minimum=1)
    per_doc = check_int(per_doc, "per_doc", minimum=1)
    rng = np.random.default_rng(seed)
    terms = np.minimum(rng.zipf(1.3, n_docs * per_doc) - 1, n_terms - 1)
    rows = np.repeat(np.arange(n_docs), per_doc)
    X = sp.coo_array((np.ones(len(rows)), (rows, terms)), shape=(n_docs, n_terms)).tocsr()
    X.sum_duplicates()
    # int32 indices, as scikit-learn's vectorizers make them (scipy keeps the int64 of the
    # coordinate arrays here).
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    df = np.bincount(X.indices, minlength=n_terms)
    X.data = np.log1p(X.data) * np.log((1 + n_docs) / (1 + df[X.indices]))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel()) + 1e-12
    X = sp.csr_array(sp.diags_array(1 / norms) @ X)
    w = rng.standard_normal(n_terms)
    score = X @ w
    y = (score > np.median(score)).astype(np.int64)
    return X, y


WORKFLOWS = ("cg", "minres", "eigsh", "lsqr", "logreg")


@dataclass
class WorkflowResult:
    """One workflow: seconds with scipy, with ``accelerated()``, with
    ``accelerated(reuse=True)``, with a prepared ``CSR`` (``nan`` where the routine takes no
    LinearOperator) and with scipy on one BLAS thread, and the answers' difference."""

    name: str
    problem: str
    scipy_s: float
    wsesparse_s: float  # the scipy call inside ``with wsesparse.accelerated():``
    difference: float  # max |a - b| / max |a| over the compared answers
    note: str = ""
    prepared_s: float = float("nan")  # ``CSR(A)`` handed to the routine, in the same block
    blas1_s: float = float("nan")  # plain scipy, BLAS limited to one thread, nothing routed
    reuse_s: float = float("nan")  # the scipy call inside ``accelerated(reuse=True)``
    linalg_s: float = float("nan")  # ``wsesparse.linalg``'s solver (``LINALG``): no block
    # (eigsh opens accelerated() itself)

    @property
    def speedup(self) -> float:
        return self.scipy_s / self.wsesparse_s

    @property
    def prepared_speedup(self) -> float:
        return self.scipy_s / self.prepared_s


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _rel_diff(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = float(np.abs(a).max()) or 1.0
    return float(np.abs(a - b).max()) / scale


def _best_of(candidates: dict[str, Callable[[], object]], rounds: int):
    """Best seconds and last output of each candidate, run in turn ``rounds`` times
    (alternating, so that drift on a shared machine hits all alike)."""
    best = dict.fromkeys(candidates, np.inf)
    outs = {}
    for _ in range(rounds):
        for label, fn in candidates.items():
            t, outs[label] = _timed(fn)
            best[label] = min(best[label], t)
    return best, outs


def _in_block(fn: Callable[[], object], reuse: bool = False) -> object:
    from wsesparse import accelerated
    with accelerated(reuse=reuse):
        return fn()


def _one_blas_thread(fn: Callable[[], object]) -> object:
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        return fn()


def _compare(name: str, problem: str, run: Callable[..., object], A, rounds: int):
    """Best times of ``run`` on scipy's ``A`` plain, under ``accelerated()`` and
    ``accelerated(reuse=True)``, on ``CSR(A)`` under ``accelerated()`` and on ``A`` with one
    BLAS thread, and of ``wsesparse.linalg``'s solver of the same name where there is one
    (``run(A, solver=...)``), and how far their answers (the solution or eigenvalues) differ
    from scipy's.

    ``run(op)`` returns ``(answer, iterations)``, iterations None where not counted; with
    counts, ``problem`` may hold ``{iterations}``, filled with scipy's count, and a column
    that ran another count is named in the note."""
    from wsesparse import CSR, linalg
    P = CSR(A)
    candidates = {"scipy": lambda: run(A),
                  "accelerated": lambda: _in_block(lambda: run(A)),
                  "reuse": lambda: _in_block(lambda: run(A), reuse=True),
                  "csr": lambda: _in_block(lambda: run(P)),
                  "blas1": lambda: _one_blas_thread(lambda: run(A))}
    if name in LINALG:
        candidates["linalg"] = lambda: run(A, solver=getattr(linalg, name))
    best, outs = _best_of(candidates, rounds)
    diff = max(_rel_diff(outs["scipy"][0], outs[k][0])
               for k in ("accelerated", "reuse", "csr", "linalg") if k in outs)
    its = {k: out[1] for k, out in outs.items()}
    note = _iterations_note(its)
    return WorkflowResult(name, problem.format(iterations=its["scipy"]), best["scipy"],
                          best["accelerated"], diff, note, prepared_s=best["csr"],
                          blas1_s=best["blas1"], reuse_s=best["reuse"],
                          linalg_s=best.get("linalg", float("nan")))


def _iterations_note(its: dict) -> str:
    """"iterations differ: scipy N, <column> M, ..." naming the columns whose count is not
    scipy's (``its``: iterations by column, scipy's under "scipy"), or "" where all agree.

    Examples
    --------
    >>> _iterations_note({"scipy": 7, "accelerated": 6, "csr": 7})
    'iterations differ: scipy 7, accelerated 6'
    """
    others = [f"{k} {n}" for k, n in its.items() if k != "scipy" and n != its["scipy"]]
    return f"iterations differ: scipy {its['scipy']}, {', '.join(others)}" if others else ""


def _counted(solver, op, *args, **kwargs):
    """``(x, iterations)`` of a scipy Krylov solver that takes a ``callback`` (called once
    per iteration)."""
    count = [0]

    def callback(_):
        count[0] += 1

    x = solver(op, *args, callback=callback, **kwargs)[0]
    return x, count[0]


SOLVERS = ("cg", "minres", "eigsh", "lsqr")  # (the workflows of solver_problems)
LINALG = ("cg", "minres", "eigsh")  # (those wsesparse.linalg has a solver for)


def solver_problems(scale: float = 1.0, iterations: int = 300,
                    only: tuple[str, ...] = ()) -> Iterator[tuple[str, str, Callable, object]]:
    """The scipy solver workflows (``SOLVERS``, or those named in ``only``), each built when
    reached: ``(name, problem, run, A)``, with ``run(op)`` returning ``(answer,
    iterations)`` (None where not counted) for ``op`` the scipy matrix ``A`` or anything
    that stands for it (a ``CSR``; for those in ``LINALG``, ``run(op, solver=...)`` calls
    ``solver`` in place of scipy's), and ``problem`` a description that may hold
    ``{iterations}``. Sizes as in :func:`run_workflows`.

    Examples
    --------
    >>> [(name, A.shape) for name, _, _, A in solver_problems(0.01, 5, ("cg", "lsqr"))]
    [('cg', (100, 100)), ('lsqr', (2000, 500))]
    """
    scale = check_real(scale, "scale", minimum=0, inclusive=(False, True))
    iterations = check_int(iterations, "iterations", minimum=1)
    if isinstance(only, str) or not set(only) <= set(SOLVERS):
        raise ValueError(f"only must be a tuple of names among {', '.join(SOLVERS)}, "
                         f"got {only!r}")
    return _solver_problems(scale, iterations, only)


def _solver_problems(scale: float, iterations: int, only: tuple[str, ...]):
    want = (lambda name: not only or name in only)
    g = max(4, int(1000 * scale))
    if want("cg") or want("minres"):
        A = poisson_2d(g)
        b = np.ones(A.shape[0])
        if want("cg"):
            yield ("cg", f"Poisson {g}x{g}, {{iterations}} iterations (max {iterations})",
                   lambda op, solver=sla.cg: _counted(solver, op, b, rtol=1e-30,
                                                      maxiter=iterations), A)
        if want("minres"):
            yield ("minres", f"Poisson {g}x{g}, {{iterations}} iterations (max {iterations})",
                   lambda op, solver=sla.minres: _counted(solver, op, b, rtol=1e-30,
                                                          maxiter=iterations), A)
    if want("eigsh"):
        n = max(50, int(200_000 * scale))
        L = graph_laplacian(n, 20)
        v0 = np.random.default_rng(1).standard_normal(n)  # (ones: the null space)
        yield ("eigsh", f"graph Laplacian {n} nodes, degree 20, 4 largest",
               lambda op, solver=sla.eigsh: _eigsh(op, v0, solver), L)
    if want("lsqr"):
        m, n = max(40, int(200_000 * scale)), max(10, int(50_000 * scale))
        R = rectangular_system(m, n, 10)
        c = np.ones(m)
        yield ("lsqr", f"{m}x{n}, 10 per row + diagonal, {{iterations}} iterations "
               f"(max {iterations})",
               lambda op: _lsqr(op, c, iterations), R)


def run_workflows(scale: float = 1.0, rounds: int = 2, iterations: int = 300,
                  only: tuple[str, ...] = ()) -> list[WorkflowResult]:
    """Run every workflow (or those named in ``only``) and return their results.

    ``scale`` multiplies the problem sizes (1.0: the Poisson grid is 1000 x 1000, the
    graph 200,000 nodes of degree 20, lsqr 200,000 x 50,000, logreg 50,000 documents).

    Examples
    --------
    >>> rs = run_workflows(scale=0.02, rounds=1, iterations=5, only=("cg",))
    >>> [r.name for r in rs], rs[0].difference < 1e-10
    (['cg'], True)
    """
    scale = check_real(scale, "scale", minimum=0, inclusive=(False, True))
    rounds = check_int(rounds, "rounds", minimum=1)
    iterations = check_int(iterations, "iterations", minimum=1)
    if isinstance(only, str) or not set(only) <= set(WORKFLOWS):
        raise ValueError(f"only must be a tuple of names among {', '.join(WORKFLOWS)}, "
                         f"got {only!r}")
    results = []
    want = (lambda name: not only or name in only)
    solvers = tuple(name for name in SOLVERS if want(name))
    if solvers:
        for name, problem, run, A in solver_problems(scale, iterations, solvers):
            results.append(_compare(name, problem, run, A, rounds))
    if want("logreg"):
        results.extend(_logreg(scale, rounds))
    return results


@dataclass
class LoopProduct:
    """Median seconds of one product inside cg's loop and of the same product alone."""

    label: str  # "accelerated" (the scipy matrix, routed), "reuse" (the same with
    # ``reuse=True``) or "CSR" (prepared)
    in_loop_s: float
    alone_s: float
    calls: int = 0  # products timed inside the loops (cg may stop before maxiter)

    @property
    def ratio(self) -> float:
        return self.in_loop_s / self.alone_s


def cg_product_in_loop(scale: float = 1.0, iterations: int = 300,
                       rounds: int = 2) -> list[LoopProduct]:
    """How much cg's neighbours slow its product down: per-product medians inside the loop
    and alone.

    Runs ``cg`` on the Poisson matrix of :func:`run_workflows` (``scale`` as there) inside
    ``accelerated()``, with a LinearOperator whose ``matvec`` times ``op @ x``: ``op`` the
    scipy matrix (routed), the same inside ``accelerated(reuse=True)``, or its prepared
    ``CSR``. Then times the same product back to back
    as many times as cg called it (at most ``iterations``: cg stops early on small grids).
    ``rounds`` alternates loop and alone runs; each median is over all their calls.

    Examples
    --------
    >>> rs = cg_product_in_loop(scale=0.02, iterations=5, rounds=1)
    >>> [r.label for r in rs], all(r.in_loop_s > 0 and r.alone_s > 0 for r in rs)
    (['accelerated', 'reuse', 'CSR'], True)
    """
    from wsesparse import CSR, accelerated
    scale = check_real(scale, "scale", minimum=0, inclusive=(False, True))
    iterations = check_int(iterations, "iterations", minimum=1)
    rounds = check_int(rounds, "rounds", minimum=1)
    g = max(4, int(1000 * scale))
    A = poisson_2d(g)
    b = np.ones(A.shape[0])
    x = np.random.default_rng(0).standard_normal(A.shape[1])
    ops = {"accelerated": A, "reuse": A, "CSR": CSR(A)}
    in_loop = {label: [] for label in ops}
    alone = {label: [] for label in ops}
    for _ in range(rounds):
        for label, op in ops.items():
            with accelerated(reuse=label == "reuse"):
                times = in_loop[label]

                def matvec(v, op=op, times=times):
                    t0 = time.perf_counter()
                    y = op @ v
                    times.append(time.perf_counter() - t0)
                    return y

                n = len(times)
                sla.cg(sla.LinearOperator(A.shape, matvec=matvec, dtype=A.dtype), b,
                       rtol=1e-30, maxiter=iterations)
                for _ in range(len(times) - n):  # as many calls alone as cg made
                    alone[label].append(_timed(lambda: op @ x)[0])
    return [LoopProduct(label, float(np.median(in_loop[label])),
                        float(np.median(alone[label])), len(in_loop[label])) for label in ops]


def format_loop_products(results: list[LoopProduct]) -> str:
    """One line per operand: the product's median inside cg's loop and alone, in ms.

    Examples
    --------
    >>> print(format_loop_products([LoopProduct("CSR", 0.0023, 0.002, 600)]))
    CSR: 2.30 ms inside the loop, 2.00 ms alone (1.15x), 600 calls each
    """
    return "\n".join(f"{r.label}: {r.in_loop_s * 1e3:.2f} ms inside the loop, "
                     f"{r.alone_s * 1e3:.2f} ms alone ({r.ratio:.2f}x), {r.calls} calls each"
                     for r in results)


def _eigsh(op, v0, solver=sla.eigsh):
    """The 4 largest eigenvalues to 1e-8 (ARPACK, 20 Lanczos vectors, fixed start); ARPACK's
    iterations are not counted."""
    return np.sort(solver(op, k=4, which="LA", v0=v0, ncv=20, tol=1e-8)[0]), None


def _lsqr(op, c, iterations: int):
    """lsqr's solution and iteration count (it stops early where the solution is exact
    to machine precision, istop 4/5: at scale 1.0 after about 69 of 300)."""
    out = sla.lsqr(op, c, atol=0, btol=0, conlim=0, iter_lim=iterations)
    return out[0], int(out[2])


def _logreg(scale: float, rounds: int) -> list[WorkflowResult]:
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return []
    n_docs, n_terms = max(100, int(50_000 * scale)), max(50, int(20_000 * scale))
    X, y = tfidf_like(n_docs, n_terms, 100)

    def fit_predict():
        clf = LogisticRegression(max_iter=50, tol=0)
        clf.fit(X, y)
        return clf.predict_proba(X)[:, 1], int(clf.n_iter_[0])

    best, outs = _best_of({"scipy": fit_predict,
                           "wsesparse": lambda: _in_block(fit_predict),
                           "reuse": lambda: _in_block(fit_predict, reuse=True),
                           "blas1": lambda: _one_blas_thread(fit_predict)}, rounds)
    # lbfgs stops before max_iter where its line search cannot improve the loss: the same
    # problem should stop at the same iteration whichever way the products are computed.
    its = {"scipy": outs["scipy"][1], "accelerated": outs["wsesparse"][1],
           "reuse": outs["reuse"][1]}
    note = "; ".join(filter(None, ["difference of the predicted probabilities",
                                   _iterations_note(its)]))
    return [WorkflowResult("logreg", f"TF-IDF-like {n_docs}x{n_terms}, lbfgs, "
                           f"{its['scipy']} iterations (max 50)",
                           best["scipy"], best["wsesparse"],
                           max(_rel_diff(outs["scipy"][0], outs[k][0])
                               for k in ("wsesparse", "reuse")), note,
                           blas1_s=best["blas1"], reuse_s=best["reuse"])]


def format_results(results: list[WorkflowResult]) -> str:
    """The results as a table, one line per workflow.

    Examples
    --------
    >>> print(format_results([WorkflowResult("cg", "Poisson", 2.0, 1.0, 0.0, prepared_s=0.8,
    ...                                      blas1_s=1.6, reuse_s=0.9, linalg_s=0.5)]))
    ... # doctest: +NORMALIZE_WHITESPACE
    workflow scipy s accelerated s speedup reuse s speedup CSR s speedup linalg s speedup
      1-BLAS s speedup difference problem
    cg         2.000         1.000   2.00x   0.900   2.22x 0.800   2.50x    0.500   4.00x
         1.600   1.25x    0.0e+00 Poisson
    """
    lines = [f"{'workflow':<8} {'scipy s':>7} {'accelerated s':>13} {'speedup':>7} "
             f"{'reuse s':>7} {'speedup':>7} "
             f"{'CSR s':>5} {'speedup':>7} {'linalg s':>8} {'speedup':>7} "
             f"{'1-BLAS s':>8} {'speedup':>7} {'difference':>10} problem"]

    def pair(t, width, scipy_s):  # seconds and speedup over scipy, or dashes
        return (f"{'-':>{width}} {'-':>7}" if np.isnan(t)
                else f"{t:>{width}.3f} {scipy_s / t:>6.2f}x")

    for r in results:
        lines.append(f"{r.name:<8} {r.scipy_s:>7.3f} {pair(r.wsesparse_s, 13, r.scipy_s)} "
                     f"{pair(r.reuse_s, 7, r.scipy_s)} {pair(r.prepared_s, 5, r.scipy_s)} "
                     f"{pair(r.linalg_s, 8, r.scipy_s)} {pair(r.blas1_s, 8, r.scipy_s)} "
                     f"{r.difference:>10.1e} "
                     f"{r.problem}" + (f" ({r.note})" if r.note else ""))
    return "\n".join(lines)
