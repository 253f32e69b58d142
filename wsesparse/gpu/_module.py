"""The CUDA source of the GPU backend and its compiled kernels (CuPy ``RawModule``, cached).

``kernels.cu`` (package data next to this file) holds C++ templates; :func:`kernel` compiles
one module per kernel family and value dtype at first use, with every instantiation of that
family listed as a name expression, and keeps it per device. CuPy also caches the compiled
binary on disk, so a new process loads it without compiling.

Everything but :func:`kernel` is plain Python, tested without cupy.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

SOURCE_PATH = Path(__file__).with_name("kernels.cu")

#: C++ type of each value dtype in kernels.cu.
VALUE_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
               np.dtype(np.complex64): "wc64", np.dtype(np.complex128): "wc128"}
#: C++ type of each index dtype.
INDEX_TYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}
#: Right-hand sides a launch of the adjoint's many-rhs kernel (seg_gemm_h) takes: lanes of
#: a warp per row of x (the host loops over chunks of the largest).
TLR_RHS_LANES = (4, 16)
#: Right-hand sides a forward launch takes from 2 on: seg_gemv_t<T, 8>, 8 sums a thread, in
#: passes of 8 (16 sums a thread took 1.57x as long for 16 of them on an H100, lanes over
#: the right-hand sides 1.55x for 2-4; docs/gpu.md).
TLR_FORWARD_WIDE = 8
#: The 16-bit storage formats of TLR bases (``DeviceTLR(storage=...)``): the C++ type of a
#: stored element for real and for complex bases.
STORAGE_TYPES = {"float16": ("w_f16", "w_f16x2"), "bfloat16": ("w_bf16", "w_bf16x2")}
_SEG_FAMILIES = ("seg_gemv_t", "seg_gemv_h", "seg_gemm_h")

_OPTIONS = ("-std=c++17",)


def max_vector(dtype) -> int:
    """Elements of ``dtype`` in one 16-byte access (the widest load of ``csr_dense``).

    Examples
    --------
    >>> max_vector(np.float32), max_vector(np.complex128)
    (4, 1)
    """
    return max(1, 16 // np.dtype(dtype).itemsize)


def _storage_suffix(family: str, dtype: np.dtype, storage: str | None) -> str:
    if storage is None:
        return ""
    if family not in _SEG_FAMILIES:
        raise ValueError(f"only the TLR kernels read 16-bit storage, not {family!r}")
    return ", " + STORAGE_TYPES[storage][dtype.kind == "c"]


def family_names(family: str, dtype, storage: str | None = None) -> list[str]:
    """The name expressions of one module: every instantiation of ``family`` for ``dtype``
    (and, for the TLR kernels, bases stored as ``storage``: ``"float16"``/``"bfloat16"``).

    Examples
    --------
    >>> family_names("csr_dense", np.float64)[:3]
    ['csr_dense<double, int, 1, false>', 'csr_dense<double, int, 1, true>', \
'csr_dense<double, int, 2, false>']
    >>> len(family_names("csr_dense", np.float64)), family_names("csr_check", np.int32)
    (8, ['csr_check<int>'])
    >>> family_names("seg_gemv_h", np.complex64, "bfloat16")
    ['seg_gemv_h<wc64, 1, w_bf16x2>']
    """
    dtype = np.dtype(dtype)
    if family == "csr_check":
        return [f"csr_check<{INDEX_TYPES[dtype]}>"]
    t = VALUE_TYPES[dtype]
    mt = _storage_suffix(family, dtype, storage)  # (TLR kernels only)
    if family in _SEG_FAMILIES:
        return [f"{e[:-1]}{mt}>" for e in _seg_names(family, t)]
    if family == "csr_dense":
        vecs = sorted({1, max_vector(dtype)})
        return [f"csr_dense<{t}, {i}, {v}, {c}>" for i in INDEX_TYPES.values() for v in vecs
                for c in ("false", "true")]
    if family == "csr_spmv4":
        return [f"csr_spmv4<{t}, {i}, {c}>" for i in INDEX_TYPES.values()
                for c in ("false", "true")]
    if family == "csr_densify":
        return [f"csr_densify<{t}, {i}>" for i in INDEX_TYPES.values()]
    raise ValueError(f"unknown kernel family {family!r}")


def _seg_names(family: str, t: str) -> list[str]:
    if family == "seg_gemv_t":
        return [f"{family}<{t}, {sc}>" for sc in (1, TLR_FORWARD_WIDE)]
    if family == "seg_gemv_h":
        return [f"{family}<{t}, 1>"]
    return [f"{family}<{t}, {ls}>" for ls in TLR_RHS_LANES]


def name(family: str, dtype, *params, storage: str | None = None) -> str:
    """The name expression of one instantiation (as listed by :func:`family_names`).

    Examples
    --------
    >>> name("csr_dense", np.complex64, np.int64, 2, True)
    'csr_dense<wc64, long long, 2, true>'
    >>> name("csr_spmv4", np.float32, np.int32, False)
    'csr_spmv4<float, int, false>'
    >>> name("seg_gemm_h", np.float32, 16)
    'seg_gemm_h<float, 16>'
    >>> name("seg_gemv_t", np.float64, 1, storage="float16")
    'seg_gemv_t<double, 1, w_f16>'
    """
    dtype = np.dtype(dtype)
    if family == "csr_check":
        return f"csr_check<{INDEX_TYPES[dtype]}>"
    args = [VALUE_TYPES[dtype]]
    if family == "csr_dense":
        index, vec, check = params
        args += [INDEX_TYPES[np.dtype(index)], str(int(vec)), "true" if check else "false"]
    elif family == "csr_spmv4":
        index, check = params
        args += [INDEX_TYPES[np.dtype(index)], "true" if check else "false"]
    elif family == "csr_densify":
        args += [INDEX_TYPES[np.dtype(params[0])]]
    else:
        args += [str(int(params[0]))]
    return f"{family}<{', '.join(args)}{_storage_suffix(family, dtype, storage)}>"


@lru_cache(maxsize=None)
def source() -> str:
    """The text of kernels.cu."""
    return SOURCE_PATH.read_text()


@lru_cache(maxsize=None)
def _module(family: str, dtype: np.dtype, device_id: int, storage: str | None = None):
    import cupy
    return cupy.RawModule(code=source(), options=_OPTIONS,
                          name_expressions=family_names(family, dtype, storage))


_KERNELS: dict = {}


def kernel(family: str, dtype, *params, storage: str | None = None):
    """The compiled ``cupy.RawKernel`` of one instantiation, on the current device (kept:
    looking it up again costs a dict access)."""
    import cupy
    dev = cupy.cuda.runtime.getDevice()
    key = (family, dtype, params, dev, storage)
    k = _KERNELS.get(key)
    if k is None:
        if family == "csr_check":
            mod = _module(family, np.dtype(params[0]), dev)
            k = mod.get_function(name(family, params[0]))
        else:
            mod = _module(family, np.dtype(dtype), dev, storage)
            k = mod.get_function(name(family, dtype, *params, storage=storage))
        _KERNELS[key] = k
    return k
