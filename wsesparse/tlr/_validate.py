"""Argument checks of the TLR builders and products, and the dtypes they settle on.

Each check returns the normalised value or raises a TypeError/ValueError that
names the argument; :func:`kernel_dtype` is also what ``wsesparse.dask`` uses
to pick the dtype of a TLR product.
"""

from __future__ import annotations

import numbers

import numpy as np

from wsesparse._checks import KERNEL_DTYPES, check_numeric_dtype, check_real, describe

__all__ = ["check_tol", "kernel_dtype", "storage_dtype", "check_seed",
           "check_shape", "check_magnitude", "reject_sparse", "rounding_slack", "work_dtype"]


def check_tol(tol, dtype: np.dtype, max_rank: int) -> float:
    """``tol`` as a float in (0, 1) that ``dtype`` bases of tiles of rank up to
    ``max_rank`` (the shorter side of the largest tile) can honour."""
    tol = check_real(tol, "tol", minimum=0, maximum=1, inclusive=(False, False))
    floor = 10.0 * rounding_slack(dtype, max_rank)
    if tol < floor:
        raise ValueError(
            f"tol={tol:g} is below what {np.dtype(dtype)} bases can hold for tiles of rank "
            f"up to {max_rank} "
            f"(rounding the factors alone costs about {floor / 10:.1e}); use tol >= {floor:.1e} "
            "or a double-precision dtype"
        )
    return tol


def kernel_dtype(dtype, name: str) -> np.dtype:
    """The kernel dtype for ``dtype``: itself if float32/64 or complex64/128, float64 for
    bool, ints and float16, else TypeError naming ``name``."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a numpy dtype or its name, got {dtype!r}") from None
    check_numeric_dtype(dtype, name)
    if not dtype.isnative:  # big-endian data (FITS, HDF5, np.load): the native equivalent
        dtype = dtype.newbyteorder("=")
    if dtype in KERNEL_DTYPES:
        return dtype
    if dtype.kind in "biu" or dtype == np.float16:
        return np.dtype(np.float64)
    raise TypeError(
        f"{name} has dtype {dtype}; TLR matrices are float32, float64, complex64 or complex128"
    )


def storage_dtype(dtype) -> np.dtype:
    """An explicit ``dtype=`` argument: one of the four kernel dtypes, nothing converted."""
    dt = kernel_dtype(dtype, "dtype")
    if dt != np.dtype(dtype).newbyteorder("="):
        raise TypeError(f"dtype must be float32, float64, complex64 or complex128, got {dtype!r}")
    return dt


def check_seed(seed):
    try:
        np.random.SeedSequence(seed)
    except (TypeError, ValueError):
        raise TypeError(f"seed must be None or a nonnegative int, got {seed!r}") from None
    return seed


def check_shape(shape) -> tuple[int, int]:
    """``shape`` as a pair of positive ints, or TypeError/ValueError naming it."""
    try:
        ok = len(shape) == 2 and all(isinstance(v, numbers.Integral)
                                     and not isinstance(v, bool) for v in shape)
    except TypeError:
        ok = False
    if not ok:
        raise TypeError(f"shape must be a pair of ints, got {shape!r}")
    m, n = int(shape[0]), int(shape[1])
    if m <= 0 or n <= 0:
        raise ValueError(f"shape must be positive, got {shape!r}")
    return m, n


# Squared norms are accumulated in float64: values must keep their squares
# (and tol**2 times those) normal and their sums finite.
_MAG_MIN, _MAG_MAX = 1e-100, 1e150


def check_magnitude(amax: float, norm2: float, what: str) -> None:
    if amax and (amax < _MAG_MIN or amax > _MAG_MAX or not np.isfinite(norm2)):
        raise ValueError(f"{what} has entries of magnitude up to {amax:.3g}; compression "
                         f"accounts squared norms in float64 and needs max |A| in "
                         f"[{_MAG_MIN:g}, {_MAG_MAX:g}] and a finite ||A||_F^2: rescale A")


def reject_sparse(x, name: str) -> None:
    if hasattr(x, "format") and hasattr(x, "tocsr"):  # scipy.sparse, without importing it
        raise TypeError(f"{name} must be a dense array, got {describe(x)} (use .toarray())")


def rounding_slack(dtype: np.dtype, nb: int) -> float:
    """Relative Frobenius error of storing rank-<=nb factors in ``dtype``.

    Rounding U (scaled by the singular values) and V elementwise perturbs a
    tile by at most about eps * (1 + sqrt(k)) * ||A_ij||_F; twice that is kept
    in reserve so the guarantee also holds for the stored (rounded) factors.
    """
    eps = np.finfo(np.dtype(dtype)).eps
    return 2.0 * eps * (1.0 + np.sqrt(nb))


def work_dtype(dtype: np.dtype) -> np.dtype:
    # Compression runs in double precision: the error accounting subtracts
    # norms of nearly equal size, which single precision cannot resolve at tol=1e-3.
    return np.dtype(np.complex128) if dtype.kind == "c" else np.dtype(np.float64)
