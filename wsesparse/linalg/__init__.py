"""Krylov solvers whose whole iteration runs on the library's kernels.

Under ``accelerated()`` only the products of scipy's Krylov solvers are ours; the vector
work between them (for cg two dot products, a norm and three scaled additions an
iteration, each a numpy call on one thread, ``alpha * p`` written to a temporary first;
about a dozen such calls for minres and bicgstab, two per basis vector for gmres) stays
numpy's. On a 1,000 x 1,000 Poisson matrix it takes more than half of a cg iteration on 2
cores, and on 16 cores it kept cg near 2x scipy whatever the product cost
(docs/solvers.md). :func:`cg`, :func:`minres`, :func:`bicgstab` and :func:`gmres` here are
scipy's algorithms, step for step, with the products on a prepared
:class:`~wsesparse.CSR` and the vector work in OpenMP kernels (``_kernels/_krylov.h``) that
read and write each vector once a step. :func:`eigsh` is scipy's ARPACK driver with the
prepared product.
"""
# Modules: _common (the prepared operator, the checks, preconditioners), _symmetric (cg,
# minres), _nonsymmetric (bicgstab, gmres), _eigsh.

from wsesparse.linalg._eigsh import eigsh
from wsesparse.linalg._nonsymmetric import bicgstab, gmres
from wsesparse.linalg._symmetric import cg, minres

__all__ = ["bicgstab", "cg", "eigsh", "gmres", "minres"]

for _f in (bicgstab, cg, eigsh, gmres, minres):
    _f.__module__ = __name__     # their public home, for help(), pickles and the docs
del _f
