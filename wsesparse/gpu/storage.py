"""16-bit storage of TLR bases on the GPU (``DeviceTLR(storage=...)``), on the host side.

TLR-MVM streams its bases once per product, so storing them in 16 bits halves (float32,
complex64) or quarters (float64, complex128) the bytes a product reads; the kernels widen
each stored value to the product's precision on load and sum in it, as tlrmvm does on GPUs.
Two formats:

* ``"float16"``: IEEE binary16, 11 significant bits (relative rounding error <= 2**-11),
  normal numbers from 2**-14 to 65504: each basis (U, V) is scaled by a power of two
  (:func:`scale`) so that its largest magnitude lies in [2**14, 2**15) before rounding, and
  the product is scaled back (exactly). Without it, the bases of a matrix of entries around
  1e-7 fell below the normal range and lost all but a few bits (10 % error).
* ``"bfloat16"``: the high half of a float32, 8 significant bits (<= 2**-8), float32's
  range (no scaling).

Complex bases store their real and imaginary parts side by side (the ``(re, im)`` pairs of
kernels.cu's ``w_f16x2``/``w_bf16x2``). Everything here is numpy: it runs without cupy.
"""

from __future__ import annotations

import numpy as np

from wsesparse._checks import describe

#: The storage formats and their significant bits.
FORMATS = {"float16": 11, "bfloat16": 8}
_LARGEST = {"float16": 65504.0, "bfloat16": float.fromhex("0x1.fep127")}


def check_storage(storage) -> str | None:
    """``storage`` if it names a format (or is None), else ValueError.

    Examples
    --------
    >>> check_storage("bfloat16"), check_storage(None)
    ('bfloat16', None)
    """
    if storage is None or (isinstance(storage, str) and storage in FORMATS):
        return storage
    raise ValueError(f"storage must be None, 'float16' or 'bfloat16', got {storage!r}")


def scale(values: np.ndarray, storage: str) -> float:
    """The power of two the values are multiplied by before rounding to ``storage``: for
    float16, the one that brings the largest finite magnitude into [2**14, 2**15) (the top
    of its range, so that the smallest values stay normal as far down as they can), at most
    the largest power of two of the values' precision whose reciprocal is normal (float32:
    2**126; beyond 2**127 the scale was inf and the product NaN: a review); 1.0 for
    bfloat16 and for values that are all zero or non-finite.

    Examples
    --------
    >>> scale(np.array([3e-7, -1e-9]), "float16") == 2.0 ** 36
    True
    >>> scale(np.array([3e-7]), "bfloat16"), scale(np.zeros(2), "float16")
    (1.0, 1.0)
    >>> scale(np.array([1e-36], np.float32), "float16") == 2.0 ** 126
    True
    """
    if storage != "float16":
        return 1.0
    v = np.abs(_parts(values))
    v = v[np.isfinite(v)]
    top = float(v.max()) if v.size else 0.0
    if top == 0.0:
        return 1.0
    # 2**top_exp: the largest power of two whose reciprocal is still normal (2**126 for
    # float32: 2**-127 would be flushed to zero where a device flushes subnormals)
    top_exp = np.finfo(np.result_type(v.dtype, np.float32)).maxexp - 2
    return float(np.ldexp(1.0, min(15 - int(np.frexp(top)[1]), top_exp)))  # top*s < 2**15


def _parts(values: np.ndarray) -> np.ndarray:
    """Real values as they are; complex ones as (re, im) pairs, flattened."""
    values = np.ascontiguousarray(values)
    if values.dtype.kind == "c":
        return values.view(values.real.dtype).reshape(-1)
    return values.reshape(-1)


def to_storage(values: np.ndarray, storage: str) -> np.ndarray:
    """The 16-bit elements (uint16; pairs ``(re, im)`` for complex values) of ``values``,
    rounded to nearest, ties to even.

    bfloat16 rounds float64 values through float32 (two roundings). NaN and inf stay NaN and
    inf; a finite value that would overflow the format raises ValueError.

    Examples
    --------
    >>> bits = to_storage(np.array([1.0, -2.5, 1 + 2 ** -8], np.float32), "bfloat16")
    >>> [hex(b) for b in bits]      # 1 + 2**-8 lies halfway: ties to the even 1.0
    ['0x3f80', '0xc020', '0x3f80']
    >>> widen(to_storage(np.array([3 - 4j], np.complex64), "float16"), "float16")
    array([ 3., -4.], dtype=float32)
    """
    storage = check_storage(storage)
    if storage is None:
        raise ValueError("storage must be 'float16' or 'bfloat16', got None")
    v = _parts(values)
    if v.dtype.kind != "f":
        raise TypeError(f"values must be float or complex, got {describe(values)}")
    if storage == "float16":
        with np.errstate(over="ignore"):  # (overflow is reported below)
            bits = v.astype(np.float16).view(np.uint16)
    else:
        with np.errstate(over="ignore"):
            b = v.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(v)
        bits[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)  # a quiet NaN, sign kept
    overflow = np.isinf(widen(bits, storage)) & np.isfinite(v)
    if overflow.any():
        big = float(np.abs(v[overflow]).max())
        raise ValueError(f"storage={storage!r} cannot hold a basis value of magnitude {big:g} "
                         f"(its largest finite value is {_LARGEST[storage]:g})"
                         + ("; use 'bfloat16' or no storage" if storage == "float16" else ""))
    return bits


def widen(bits: np.ndarray, storage: str) -> np.ndarray:
    """float32 values of 16-bit elements (what the kernels' ``w_wide`` computes).

    Examples
    --------
    >>> widen(np.array([0x3C00, 0xC000], np.uint16), "float16")
    array([ 1., -2.], dtype=float32)
    """
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    if storage == "float16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def encode(values: np.ndarray, storage: str) -> tuple[np.ndarray, float, float]:
    """``(bits, s, error)``: the 16-bit elements of ``values * s`` (:func:`to_storage`,
    ``s`` from :func:`scale`) and the relative error ``||stored - values||_F /
    ||values||_F`` of the values they give back (0 for all-zero values): what
    ``DeviceTLR(storage=...)`` keeps of each basis, rounded once.

    Examples
    --------
    >>> bits, s, err = encode(np.array([1e-7, -3e-9]), "float16")
    >>> bits.dtype, s == 2.0 ** 38, 0 < err <= 2.0 ** -11
    (dtype('uint16'), True, True)
    """
    values = np.asarray(values)
    if values.dtype.kind not in "fc":   # (values * s below would make integers float)
        raise TypeError(f"values must be float or complex, got {describe(values)}")
    s = scale(values, storage)
    bits = to_storage(values * s, storage)
    ref = _parts(values).astype(np.float64)
    back = widen(bits, storage).astype(np.float64) / s
    # (relative to the largest magnitude first: the norms of values near 1e-306 underflowed
    # to 0 and reported an error of 0)
    top = float(np.abs(ref).max()) if ref.size else 0.0
    if top == 0.0 or not np.isfinite(top):
        return bits, s, 0.0 if top == 0.0 else float("nan")
    return bits, s, float(np.linalg.norm((back - ref) / top) / np.linalg.norm(ref / top))


def stored_values(values: np.ndarray, storage: str) -> np.ndarray:
    """``values`` as a product sees them after storing: scaled (:func:`scale`), rounded to
    ``storage``, widened and scaled back, in ``values``' dtype and shape.

    Examples
    --------
    >>> stored_values(np.array([1/3], np.float64), "bfloat16")
    array([0.33398438])
    >>> v = stored_values(np.array([1e-7, 3e-9]), "float16")    # subnormal unscaled
    >>> bool(np.all(np.abs(v / [1e-7, 3e-9] - 1) <= 2.0 ** -11))
    True
    """
    values = np.asarray(values)
    bits, s, _ = encode(values, storage)
    w = widen(bits, storage).astype(np.float64) / s
    if values.dtype.kind == "c":
        w = w[0::2] + 1j * w[1::2]
    return w.astype(values.dtype).reshape(values.shape)


def relative_error(values: np.ndarray, storage: str) -> float:
    """``||stored - values||_F / ||values||_F`` (0 for all-zero values; see :func:`encode`).

    Examples
    --------
    >>> relative_error(np.ones(4, np.float32), "float16")
    0.0
    """
    return encode(values, storage)[2]
