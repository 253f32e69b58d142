"""Input checks shared by the public entry points.

Every check raises TypeError (wrong kind of object or dtype) or ValueError
(wrong shape or content) with a message that names the argument.
"""

from __future__ import annotations

import numpy as np

# dtypes the compiled kernels handle; everything else numeric goes to scipy.
KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64),
                 np.dtype(np.complex64), np.dtype(np.complex128))

_NON_NUMERIC_KINDS = {"O": "object", "U": "str", "S": "bytes", "V": "void",
                      "M": "datetime64", "m": "timedelta64", "T": "str"}


# scipy.sparse's value dtypes, in the order scipy's ``upcast`` tries them.
_SCIPY_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.intc, np.uintc, np.int_, np.uint,
    np.longlong, np.ulonglong, np.float32, np.float64, np.longdouble,
    np.complex64, np.complex128, np.clongdouble))


def result_dtype(*dtypes) -> np.dtype:
    """dtype of a sparse product, by scipy's rule (``scipy.sparse._sputils.upcast``).

    numpy's ``result_type``, then the first scipy.sparse dtype it casts to
    safely: ``float16`` is not a sparse dtype, so ``int8 @ float16`` is
    float32 (numpy would say float16).

    Examples
    --------
    >>> import numpy as np
    >>> result_dtype(np.int8, np.float16), result_dtype(np.int32, np.float32)
    (dtype('float32'), dtype('float64'))
    """
    t = np.result_type(*dtypes)
    if t in KERNEL_DTYPES:  # the common case, without the scan below
        return t
    for cand in _SCIPY_DTYPES:
        if np.can_cast(t, cand):
            return cand
    raise TypeError(f"no scipy.sparse dtype holds the product of {dtypes}")


def describe(x) -> str:
    """Short ``type shape dtype`` description of an operand for error messages."""
    if x is None:
        return "None"
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None:
        return type(x).__name__
    return f"{type(x).__name__} of shape {tuple(shape)} and dtype {dtype}"


def check_numeric_dtype(dtype: np.dtype, name: str) -> None:
    """Reject dtypes that a matrix product cannot use (object, str, datetime...)."""
    kind = np.dtype(dtype).kind
    if kind in _NON_NUMERIC_KINDS:
        raise TypeError(
            f"{name} has dtype {np.dtype(dtype)} ({_NON_NUMERIC_KINDS[kind]}); "
            "a matrix product needs a bool, integer, float or complex dtype"
        )


def as_dense_operand(x, name: str) -> np.ndarray:
    """Convert a dense operand to an ndarray, rejecting what ``A @ B`` would not take."""
    if x is None:
        raise TypeError(f"{name} is None; expected an array-like operand")
    if np.isscalar(x) or (isinstance(x, np.ndarray) and x.ndim == 0):
        raise ValueError(
            f"{name} is a scalar ({x!r}); scalar operands are not allowed in a "
            "matrix product, use '*' instead"
        )
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{name} cannot be converted to an array: {exc}") from None
    check_numeric_dtype(arr.dtype, name)
    if arr.ndim == 0:
        raise ValueError(f"{name} is a scalar; scalar operands are not allowed in a matrix product")
    if arr.ndim > 2:
        raise ValueError(
            f"{name} has {arr.ndim} dimensions (shape {arr.shape}); "
            "sparse products take 1-D or 2-D dense operands"
        )
    return arr


def csr_error_message(code: int, name: str, shape: tuple[int, int], nnz: int) -> str:
    """Explain a nonzero return code of the kernels' ``csr_check``."""
    reasons = {
        1: "indptr[0] is not 0",
        2: "indptr decreases somewhere",
        3: f"indptr[-1] exceeds the number of stored indices ({nnz})",
        4: f"a stored index is negative or not below {shape[1]}",
    }
    return f"{name} has a corrupt compressed structure ({shape[0]}x{shape[1]}): {reasons[code]}"
