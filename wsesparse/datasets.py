"""Synthetic data sets for tests, benchmarks and notebooks.

``seismic_slice`` builds one frequency slice of a reflection response, the
kind of dense but data-sparse operator that multi-dimensional deconvolution
applies with TLR-MVM. ``random_csr`` and ``random_dense`` are the seeded
random operands of ``wsesparse bench`` and of the scripts and asv suite in
``benchmarks/``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import check_int, check_real, check_seed

__all__ = ["seismic_slice", "hilbert_order", "random_csr", "random_dense"]


def hilbert_order(nx: int, ny: int) -> np.ndarray:
    """Permutation that visits an ``nx x ny`` grid along a Hilbert curve.

    Returns the flat indices ``ix * ny + iy`` in curve order. Points close on
    the curve are close in space, so consecutive index blocks (tiles) hold
    compact patches of the grid, which lowers the ranks of off-diagonal tiles.

    Examples
    --------
    >>> from wsesparse.datasets import hilbert_order
    >>> hilbert_order(2, 2).tolist()
    [0, 1, 3, 2]
    """
    nx = check_int(nx, "nx", minimum=1)
    ny = check_int(ny, "ny", minimum=1)
    side = 1
    while side < max(nx, ny):
        side *= 2
    ix, iy = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    x, y = ix.ravel().astype(np.int64), iy.ravel().astype(np.int64)
    d = np.zeros_like(x)
    s = side // 2
    # Classic xy -> d conversion (Hamilton / Wikipedia "Hilbert curve"), vectorised.
    while s > 0:
        rx = ((x & s) > 0).astype(np.int64)
        ry = ((y & s) > 0).astype(np.int64)
        d += s * s * ((3 * rx) ^ ry)
        # rotate the quadrant
        flip = ry == 0
        swap_x = np.where(flip & (rx == 1), side - 1 - x, x)
        swap_y = np.where(flip & (rx == 1), side - 1 - y, y)
        x, y = np.where(flip, swap_y, swap_x), np.where(flip, swap_x, swap_y)
        s //= 2
    return np.argsort(d, kind="stable")


def _dtype_or_none(d) -> np.dtype | None:
    try:
        return np.dtype(d)
    except TypeError:
        return None


def _real_values(v, name: str) -> np.ndarray:
    """``v`` as a flat float64 array, or TypeError naming ``name``."""
    try:
        arr = np.asarray(v)
        if arr.dtype.kind not in "biuf":
            raise TypeError
        return arr.astype(np.float64).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of real numbers, got {v!r}") from None


def seismic_slice(nx: int = 30, ny: int = 30, *, spacing: float = 20.0,
                  frequency: float = 10.0, velocity: float = 2000.0,
                  depths: Sequence[float] = (350.0, 800.0, 1400.0),
                  reflectivity: Sequence[float] = (0.3, -0.2, 0.25),
                  n_multiples: int = 2, receiver_depth: float = 10.0,
                  attenuation: float = 0.002, order: str = "hilbert",
                  dtype=np.complex64, return_function: bool = False):
    """One frequency slice of the reflection response of a layered medium.

    Sources and receivers sit on the same ``nx x ny`` surface grid
    (``spacing`` metres apart; receivers ``receiver_depth`` below the sources).
    Below them are flat reflectors at ``depths`` with reflection coefficients
    ``reflectivity``. By the method of images, the reflection of order p
    (primary p = 1, then surface multiples) off reflector l arrives as a
    spherical wave from an image source at depth ``2 p d_l``:

    ``A[r, s] = 1000 sum_l sum_p  (-1)^(p-1) R_l^p  exp(-i k rho) / rho``,
    ``rho = sqrt(|x_r - x_s|^2 + (2 p d_l - z_s - z_r)^2)``,

    with wavenumber ``k = 2 pi frequency / velocity * (1 - i attenuation)``
    (the small imaginary part damps long paths as real absorption does); the
    factor 1000 (metres to kilometres in 1 / rho) makes the values of order 1.
    Like recorded data, the slice is dense, oscillatory and smooth in the
    source and receiver positions, so tiles of nearby sources and receivers
    are numerically low-rank; ranks grow with frequency.

    Parameters
    ----------
    nx, ny : int
        Grid of sources (and receivers); the matrix is ``(nx*ny) x (nx*ny)``.
        ``nx = ny = 99`` gives the 9801 x 9801 slice of the benchmark.
    spacing : float
        Grid spacing in metres.
    frequency : float
        Frequency in Hz.
    velocity : float
        Wave speed in m/s (one constant speed above all reflectors).
    depths, reflectivity : sequences of float of equal length
        Reflector depths (m) and reflection coefficients (``|R| < 1``).
    n_multiples : int
        Reflection orders per reflector (1 = primaries only).
    receiver_depth : float
        Depth of the receiver plane below the source plane (m).
    attenuation : float
        Relative imaginary part of the wavenumber (>= 0).
    order : {"hilbert", "row"}
        Ordering of sources and receivers: along a Hilbert curve over the
        grid (default; much lower tile ranks) or row by row.
    dtype : complex64 or complex128 (float32/float64 take the real part)
    return_function : bool
        If True return ``(f, shape)`` where ``f(rows, cols)`` computes a block
        (two ``slice`` objects) on demand, for
        :meth:`wsesparse.TLRMatrix.from_function` on matrices too large to hold.

    Returns
    -------
    ndarray of shape (nx*ny, nx*ny), or (callable, shape)

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse.datasets import seismic_slice
    >>> A = seismic_slice(nx=10, ny=10)
    >>> A.shape, A.dtype
    ((100, 100), dtype('complex64'))
    >>> f, shape = seismic_slice(nx=10, ny=10, return_function=True)
    >>> bool(np.array_equal(f(slice(0, 5), slice(3, 9)), A[:5, 3:9]))
    True
    """
    nx = check_int(nx, "nx", minimum=1)
    ny = check_int(ny, "ny", minimum=1)
    positive = dict(minimum=0, inclusive=(False, True))
    spacing = check_real(spacing, "spacing", **positive)
    frequency = check_real(frequency, "frequency", **positive)
    velocity = check_real(velocity, "velocity", **positive)
    n_multiples = check_int(n_multiples, "n_multiples", minimum=1)
    attenuation = check_real(attenuation, "attenuation", minimum=0)
    receiver_depth = check_real(receiver_depth, "receiver_depth")
    depths, refl = (_real_values(v, name) for v, name in ((depths, "depths"),
                                                          (reflectivity, "reflectivity")))
    if depths.size == 0 or depths.shape != refl.shape:
        raise ValueError(f"depths and reflectivity must be nonempty and of equal length, got "
                         f"{depths.size} and {refl.size}")
    if not (np.isfinite(depths).all() and (depths > max(receiver_depth, 0.0)).all()):
        # (a reflector at or above the sources, possible with receivers above them, gave
        # a zero distance and inf/NaN entries: a review)
        raise ValueError(f"depths must be finite and below both the sources (0) and "
                         f"receiver_depth={receiver_depth}, got {depths.tolist()}")
    if not (np.abs(refl) < 1).all():
        raise ValueError(f"reflectivity must lie in (-1, 1), got {refl.tolist()}")
    if order not in ("hilbert", "row"):
        raise ValueError(f"order must be 'hilbert' or 'row', got {order!r}")
    dtype = _float_dtype(dtype)

    idx = hilbert_order(nx, ny) if order == "hilbert" else np.arange(nx * ny)
    gx = (idx // ny).astype(np.float64) * spacing
    gy = (idx % ny).astype(np.float64) * spacing
    k = 2 * np.pi * frequency / velocity * (1 - 1j * attenuation)
    # (vertical distance of the image source, amplitude) per arrival
    arrivals = [(2 * p * d - receiver_depth, (-1) ** (p - 1) * R**p)
                for d, R in zip(depths, refl) for p in range(1, n_multiples + 1)]
    n = nx * ny

    # Single-precision outputs are computed in single precision (phases up to
    # ~100 rad lose ~1e-5 rad, far below what float32 stores); about 2x faster.
    real = np.float32 if _single(dtype) else np.float64
    with np.errstate(over="ignore"):
        far = (np.ptp(gx) ** 2 + np.ptp(gy) ** 2 if n else 0.0) + max(dz * dz
                                                                      for dz, _ in arrivals)
    if not far < np.finfo(np.float64).max / 4:
        # (spacing=1e155, depths=(1e160,): squared distances of inf, then NaN entries)
        raise ValueError(f"spacing={spacing:g} and depths up to {depths.max():g} put sources "
                         "and receivers too far apart for float64 distances; use smaller ones")
    if real is np.float32 and not far < np.finfo(np.float32).max / 4:
        # Squared distances beyond float32 (spacing=1e20): inf, then cos(inf) = NaN where
        # complex128 gives finite values (a review found it). Computed in float64 instead.
        real = np.float64
    if min(real(dz * dz) for dz, _ in arrivals) <= 0:
        # (depths=(1e-30,), receiver_depth=0: dz**2 underflowed, rho = 0, inf entries)
        raise ValueError(f"depths {depths.tolist()} lie too close to the source and receiver "
                         f"planes (receiver_depth={receiver_depth}) for {np.dtype(real)} "
                         "distances")
    with np.errstate(over="ignore"):
        kr, ki = real(k.real), real(-k.imag)
    if not (np.isfinite(kr) and np.isfinite(ki)):
        raise ValueError(f"the wavenumber 2 pi frequency / velocity * (1 - i attenuation) = "
                         f"{k:.3g} overflows {np.dtype(real)} (frequency={frequency:g}, "
                         f"velocity={velocity:g}, attenuation={attenuation:g})")
    gxr, gyr = gx.astype(real), gy.astype(real)

    def block(rows: slice, cols: slice) -> np.ndarray:
        dx = gxr[rows, None] - gxr[None, cols]
        dy = gyr[rows, None] - gyr[None, cols]
        h2 = dx * dx + dy * dy
        re = np.zeros(h2.shape, dtype=real)
        im = np.zeros(h2.shape, dtype=real) if dtype.kind == "c" else None
        for dz, amp in arrivals:
            rho = np.sqrt(h2 + real(dz * dz))
            # amp * exp(-i k rho) / rho with k = kr - i ki: the magnitude is
            # amp * exp(-ki rho) / rho and the phase -kr rho.
            mag = real(1000.0 * amp) * np.exp(-ki * rho) / rho  # 1000: metres -> O(1) values
            phase = kr * rho
            re += mag * np.cos(phase)
            if im is not None:
                im -= mag * np.sin(phase)
        if im is None:
            return re.astype(dtype, copy=False)
        out = np.empty(h2.shape, dtype=dtype)
        out.real, out.imag = re, im
        return out

    if return_function:
        return block, (n, n)
    A = np.empty((n, n), dtype=dtype)
    step = max(1, (1 << 20) // n)  # a few MB of temporaries per block of rows

    def fill(r: int) -> None:
        A[r:r + step] = block(slice(r, min(r + step, n)), slice(0, n))

    # numpy ufuncs release the GIL, so row blocks fill in parallel.
    with ThreadPoolExecutor(min(os.cpu_count() or 1, 8)) as pool:
        list(pool.map(fill, range(0, n, step)))
    return A


def _float_dtype(dtype) -> np.dtype:
    """float32/float64/complex64/complex128 (float16 and longer floats: scipy.sparse and
    the kernels have none), else TypeError naming ``dtype``."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a float or complex dtype, got {dtype!r}") from None
    if (dtype.kind, dtype.itemsize) not in (("f", 4), ("f", 8), ("c", 8), ("c", 16)):
        raise TypeError(f"dtype must be float32, float64, complex64 or complex128, got {dtype}")
    return dtype


def _single(dtype: np.dtype) -> bool:
    """Whether ``dtype`` (one of ``_float_dtype``'s) is single precision, judged by kind and
    size: ``'>f8' != np.float64``, and was computed in float32 (a review)."""
    return (dtype.kind, dtype.itemsize) in (("f", 4), ("c", 8))


def random_csr(m: int, k: int, density: float, dtype=np.float64, seed: int = 0, *,
               method: str = "blocks") -> sp.csr_matrix:
    """A seeded random ``m x k`` CSR matrix (sorted indices, no duplicates).

    Parameters
    ----------
    m, k : int
        Shape.
    density : float in [0, 1]
        Fraction of the entries that are nonzeros.
    dtype : float32, float64, complex64 or complex128
    seed : int
        Seed of ``numpy.random.default_rng``; equal arguments give equal matrices.
    method : {"blocks", "scipy"}
        ``"blocks"``: every entry is a nonzero with probability ``density``
        (i.i.d. Bernoulli), drawn a block of rows at a time (at most 2**24
        uniforms), so 16384 x 16384 at density 0.5 needs no more memory than
        the result; standard normal values (float32 draws for float32 and
        complex64). What ``wsesparse bench``, ``benchmarks/scaling.py`` and
        ``benchmarks/crossover.py`` time. ``"scipy"``: exactly
        ``round(density * m * k)`` nonzeros placed by ``scipy.sparse.random``
        with its values (uniform in [0, 1)); the matrices of the asv suite
        (``benchmarks/bench_matmul.py``). Complex matrices of either method
        get standard normal imaginary parts.

    Returns
    -------
    scipy.sparse.csr_matrix
        int32 indices where they fit.

    Examples
    --------
    >>> from wsesparse.datasets import random_csr
    >>> A = random_csr(100, 50, 0.1, "float32")
    >>> A.shape, A.dtype, A.has_canonical_format
    ((100, 50), dtype('float32'), True)
    >>> random_csr(100, 50, 0.1, "float32", method="scipy").nnz
    500
    """
    m, k = check_int(m, "m", minimum=0), check_int(k, "k", minimum=0)
    density = check_real(density, "density", minimum=0, maximum=1)
    dtype = _float_dtype(dtype)
    real = np.float32 if _single(dtype) else np.float64
    rng = np.random.default_rng(check_seed(seed))
    if method == "scipy":
        A = sp.random(m, k, density=density, format="csr", random_state=rng, dtype=real)
        A = A.astype(dtype)
        if dtype.kind == "c":
            A.data = (A.data + 1j * rng.standard_normal(A.nnz)).astype(dtype)  # not complex128
        return sp.csr_matrix(A)
    if method != "blocks":
        raise ValueError(f"method must be 'blocks' or 'scipy', got {method!r}")
    # scipy.sparse.random draws all m*k*density positions at once, which is slow and needs
    # many GB at m = k = 16384, density 0.5; this holds one block of uniforms at a time.
    block = max(1, min(m, (1 << 24) // max(k, 1)))
    indptr = np.zeros(m + 1, dtype=np.int64)
    chunks = []
    col_t = np.int32 if k < 2**31 else np.int64
    # float32 uniforms are multiples of 2**-24, so u < density holds with probability
    # ceil(density * 2**24) / 2**24 (1.2x density at 1e-7, 60x at 1e-9). The uniforms on
    # the boundary step, floor(density * 2**24) * 2**-24, are kept with probability the
    # fraction of the step below density, drawn from a stream of their own (the matrices
    # of other densities keep their entries but those few).
    q = density * 2.0**24
    step, frac = np.float32(np.floor(q) * 2.0**-24), q - np.floor(q)
    edge_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]) if frac else None
    for r0 in range(0, m, block):
        u = rng.random((min(block, m - r0), k), dtype=np.float32)
        mask = u < density
        if edge_rng is not None:
            on_edge = np.flatnonzero(u == step)
            mask.flat[on_edge] = edge_rng.random(on_edge.size) < frac
        del u
        indptr[r0 + 1:r0 + 1 + mask.shape[0]] = mask.sum(axis=1)
        chunks.append(np.nonzero(mask)[1].astype(col_t))
        del mask
    np.cumsum(indptr, out=indptr)
    indices = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
    nnz = indices.size
    data = rng.standard_normal(nnz, dtype=real).astype(dtype)
    if dtype.kind == "c":
        data.imag = rng.standard_normal(nnz)
    # (column indices as well as nnz: k >= 2**31 with fewer nonzeros wrapped them)
    idx_t = np.int32 if max(nnz, k) < 2**31 else np.int64
    return sp.csr_matrix((data, indices.astype(idx_t, copy=False), indptr.astype(idx_t)),
                         shape=(m, k))


def random_dense(k: int, n: int, dtype=np.float64, seed: int = 1, *,
                 draws=None) -> np.ndarray:
    """A seeded random ``k x n`` array of standard normal values (C order).

    Parameters
    ----------
    k, n : int
        Shape.
    dtype : float32, float64, complex64 or complex128
    seed : int
        Seed of ``numpy.random.default_rng``; equal arguments give equal arrays.
    draws : float dtype or None
        dtype in which the (real parts of the) values are drawn before the cast to
        ``dtype``. None: float32 for dtypes of 8 bytes or less (float32, float64 and
        complex64), float64 for complex128, as ``wsesparse bench`` draws them; the asv
        suite (``benchmarks/bench_matmul.py``) draws float64. Imaginary parts are drawn
        in float64.

    Returns
    -------
    ndarray of shape (k, n)

    Examples
    --------
    >>> from wsesparse.datasets import random_dense
    >>> X = random_dense(4, 3, "complex64")
    >>> X.shape, X.dtype, X.flags.c_contiguous
    ((4, 3), dtype('complex64'), True)
    """
    k, n = check_int(k, "k", minimum=0), check_int(n, "n", minimum=0)
    dtype = _float_dtype(dtype)
    if draws is None:
        draws = np.float32 if dtype.itemsize <= 8 else np.float64
    elif _dtype_or_none(draws) not in (np.float32, np.float64):
        raise TypeError(f"draws must be float32, float64 or None, got {draws!r}")
    rng = np.random.default_rng(check_seed(seed))
    X = rng.standard_normal((k, n), dtype=draws).astype(dtype)
    if dtype.kind == "c":
        X.imag = rng.standard_normal((k, n))
    return X
