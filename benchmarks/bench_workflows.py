"""asv benchmarks of the solver workflows users run (``wsesparse/bench/workflows.py``).

Each ``time_*`` runs a fixed number of iterations of a scipy routine with the product either
scipy's own (``op="scipy"``), routed by ``wsesparse.accelerated()`` around the unmodified call
(``op="accelerated"``; ``op="reuse"``: ``accelerated(reuse=True)``, whose prepared operand,
made in the first timed call, lives as long as the block, from setup to teardown), or a
prepared ``wsesparse.CSR`` handed to the routine as its
LinearOperator inside the same block (``op="csr"``), as ``wsesparse bench --workflows``
does; ``Krylov`` also times ``wsesparse.linalg``'s cg, minres, bicgstab and gmres on the
scipy matrix (``op="linalg"``, no block), and ``KrylovComplex`` its bicgstab and gmres on a
complex one. Sizes are a quarter of ``wsesparse bench
--workflows``' defaults (Poisson 500x500, a 50,000-node graph of degree 20, lsqr 50,000 x
12,500, logreg 12,500 documents) so that every setup and call takes about a second at most.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

try:
    import wsesparse  # noqa: F401
except ImportError:  # `asv run --python=same` from a source tree built in place
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import wsesparse  # noqa: E402 (bound here too: the fallback above left the name unbound)
from wsesparse import CSR
from wsesparse.bench.workflows import graph_laplacian, poisson_2d, rectangular_system, tfidf_like

OPS = ["scipy", "accelerated", "reuse", "csr"]


def _operand(A, op):
    return CSR(A) if op == "csr" else A


class _Block:
    """``wsesparse.accelerated()`` held from setup to teardown for the routed ops."""

    def setup(self, op):
        self._block = (wsesparse.accelerated(reuse=op == "reuse") if op != "scipy"
                       else None)
        if self._block is not None:
            self._block.__enter__()

    def teardown(self, op):
        if self._block is not None:
            self._block.__exit__(None, None, None)


class Krylov(_Block):
    """cg and minres, 100 iterations, bicgstab, 50 (two products each), and gmres, 3
    cycles of 20, on the 2-D Poisson matrix (250,000 unknowns)."""

    params = [OPS + ["linalg"]]
    param_names = ["op"]

    def setup(self, op):
        super().setup(op if op != "linalg" else "scipy")
        self.A = _operand(poisson_2d(500), op)
        self.b = np.ones(500 * 500)
        self.solvers = wsesparse.linalg if op == "linalg" else sla

    def time_cg(self, op):
        self.solvers.cg(self.A, self.b, rtol=1e-30, maxiter=100)

    def time_minres(self, op):
        self.solvers.minres(self.A, self.b, rtol=1e-30, maxiter=100)

    def time_bicgstab(self, op):
        self.solvers.bicgstab(self.A, self.b, rtol=1e-30, maxiter=50)

    def time_gmres(self, op):
        self.solvers.gmres(self.A, self.b, rtol=1e-30, restart=20, maxiter=3)


class KrylovComplex(_Block):
    """bicgstab, 50 iterations, and gmres, 3 cycles of 20, on a complex128 Helmholtz-like
    matrix: the Poisson matrix of ``Krylov`` minus 0.5 (1 + 0.3i) I (a damped wave
    equation in the frequency domain: complex symmetric, not Hermitian)."""

    params = [["scipy", "accelerated", "linalg"]]
    param_names = ["op"]

    def setup(self, op):
        super().setup(op if op != "linalg" else "scipy")
        P = poisson_2d(500)
        shift = sp.diags_array(np.full(P.shape[0], 0.5 * (1 + 0.3j)))
        self.A = sp.csr_array(P - shift)
        self.b = np.ones(P.shape[0], dtype=np.complex128)
        self.solvers = wsesparse.linalg if op == "linalg" else sla

    def time_bicgstab(self, op):
        self.solvers.bicgstab(self.A, self.b, rtol=1e-30, maxiter=50)

    def time_gmres(self, op):
        self.solvers.gmres(self.A, self.b, rtol=1e-30, restart=20, maxiter=3)


class Eigsh(_Block):
    """eigsh, 4 largest eigenvalues (to 1e-8) of a 50,000-node graph Laplacian."""

    params = [OPS]
    param_names = ["op"]
    timeout = 120

    def setup(self, op):
        super().setup(op)
        self.L = _operand(graph_laplacian(50_000, 20), op)
        self.v0 = np.random.default_rng(1).standard_normal(50_000)

    def time_eigsh(self, op):
        sla.eigsh(self.L, k=4, which="LA", v0=self.v0, ncv=20, tol=1e-8)


class Lsqr(_Block):
    """lsqr, 100 iterations, 50,000 x 12,500: 10 random nonzeros per row and the diagonal of
    the top block (10.25 per row)."""

    params = [OPS]
    param_names = ["op"]

    def setup(self, op):
        super().setup(op)
        self.R = _operand(rectangular_system(50_000, 12_500, 10), op)
        self.c = np.ones(50_000)

    def time_lsqr(self, op):
        sla.lsqr(self.R, self.c, atol=0, btol=0, conlim=0, iter_lim=100)


class LogReg(_Block):
    """scikit-learn ``LogisticRegression`` (lbfgs, at most 50 iterations) fit and predict on
    12,500 TF-IDF-like documents of 5,000 terms (no prepared operand: scikit-learn takes
    the scipy matrix). Skipped where scikit-learn is not installed."""

    params = [["scipy", "accelerated", "reuse"]]
    param_names = ["op"]

    def setup(self, op):
        try:
            from sklearn.linear_model import LogisticRegression
        except ImportError:
            raise NotImplementedError("scikit-learn is not installed")
        self.X, self.y = tfidf_like(12_500, 5_000, 100)
        self.model = LogisticRegression(max_iter=50, tol=0)
        super().setup(op)

    def time_fit_predict(self, op):
        self.model.fit(self.X, self.y)
        self.model.predict_proba(self.X)


class BlockOpen:
    """What opening an ``accelerated()`` block costs per ``blas_threads`` setting, and a
    small BLAS-limited product (``method="dense", n_threads=1``, 64^2 times 8 columns): each
    took about 1 ms while every one let threadpoolctl scan the loaded libraries
    (``wsesparse/_blas_libs.py``)."""

    params = [["shared", "1", "none", "dense n_threads=1"]]
    param_names = ["what"]

    def setup(self, what):
        import scipy.sparse as sp
        self.A = sp.random(64, 64, density=0.3, format="csr", random_state=0)
        self.X = np.ones((64, 8))
        self.blas_threads = {"shared": "shared", "1": 1, "none": None}.get(what)

    def time_open(self, what):
        if what == "dense n_threads=1":
            wsesparse.sparse_matmul(self.A, self.X, method="dense", n_threads=1)
        else:
            with wsesparse.accelerated(blas_threads=self.blas_threads):
                pass
