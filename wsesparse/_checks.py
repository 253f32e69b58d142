"""Input checks shared by the public entry points.

Every check raises TypeError (wrong kind of object or dtype) or ValueError
(wrong shape or content) with a message that names the argument.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np
import scipy.sparse as sp

from wsesparse._kernels._csr_tools import (CSR_BAD_INDEX, CSR_BAD_START, CSR_DECREASING,
                                           CSR_SHORT)

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
    if (len(dtypes) == 2 and dtypes[0] is dtypes[1] and getattr(dtypes[0], "char", "") in "fdFD"
            and dtypes[0].isnative):
        return dtypes[0]  # the commonest case, at no cost (result_type makes '>f8' native)
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


# -- scalar arguments ------------------------------------------------------------


def _shown(value) -> str:
    """``value`` for an error message: its repr, with its type unless int, float or None."""
    if value is None or type(value) in (int, float):
        return repr(value)
    if isinstance(value, np.generic):  # numpy 2 reprs as np.float64(0.5): show 0.5 (float64)
        return f"{value.item()!r} ({type(value).__name__})"
    return f"{value!r} ({type(value).__name__})"


def _bound(x) -> str:
    """A bound as written in a message: ``1``, ``0.5``, ``48000``, ``1e-300``."""
    if isinstance(x, numbers.Integral) or (isinstance(x, float) and x.is_integer()
                                           and abs(x) < 1e16):
        return str(int(x))
    return repr(float(x))


def _int_expected(minimum, maximum, allow_none: bool) -> str:
    if maximum is None:
        what = {None: "an int", 1: "a positive int", 0: "a nonnegative int"}.get(
            minimum, f"an int >= {minimum}")
    elif minimum is None:
        what = f"an int <= {maximum}"
    else:
        what = f"an int in [{minimum}, {maximum}]"
    return what + " or None" if allow_none else what


def _real_expected(minimum, maximum, inclusive, finite: bool, allow_none: bool) -> str:
    lo_in, hi_in = inclusive
    fin = "finite " if finite else ""
    if minimum is not None and maximum is not None:
        what = (f"a number in {'[' if lo_in else '('}{_bound(minimum)}, "
                f"{_bound(maximum)}{']' if hi_in else ')'}")
    elif minimum is not None and minimum == 0:
        what = f"a {'nonnegative' if lo_in else 'positive'} {fin}number"
    elif minimum is not None:
        what = f"a {fin}number {'>=' if lo_in else '>'} {_bound(minimum)}"
    elif maximum is not None:
        what = f"a {fin}number {'<=' if hi_in else '<'} {_bound(maximum)}"
    else:
        what = f"a {fin}number"
    return what + " or None" if allow_none else what


def check_int(value, name: str, *, minimum: int | None = None, maximum: int | None = None,
              allow_none: bool = False) -> int | None:
    """``value`` as a Python int in ``[minimum, maximum]``, or an error that names ``name``.

    Accepts any ``numbers.Integral`` (Python ints, numpy integer scalars) except
    ``bool`` and ``numpy.bool_``: ``True`` is not a count. Floats are rejected, even
    integral ones (``2.0``), as ``range`` and numpy's shapes reject them.

    Parameters
    ----------
    value : object
        The argument to check.
    name : str
        The argument's name as the caller knows it (``"nb"``, ``"--rows"``,
        ``"Machine.cols"``); every message starts with it.
    minimum, maximum : int or None
        Inclusive bounds; None means unbounded on that side. ``minimum=1`` reads
        "a positive int" in messages, ``minimum=0`` "a nonnegative int".
    allow_none : bool
        Whether None is accepted (and returned as None).

    Returns
    -------
    int or None

    Raises
    ------
    TypeError
        If ``value`` is not an integer (or None where ``allow_none``): ``nb must be a
        positive int, got 0.5``.
    ValueError
        If it lies outside the bounds: ``nb must be a positive int, got 0``.

    Examples
    --------
    >>> import numpy as np
    >>> check_int(np.int64(8), "n_tokens", minimum=1)
    8
    >>> check_int(None, "n_threads", minimum=1, allow_none=True) is None
    True
    >>> for bad in (0, 0.5, True):
    ...     try:
    ...         check_int(bad, "nb", minimum=1)
    ...     except (TypeError, ValueError) as exc:
    ...         print(type(exc).__name__, exc)
    ValueError nb must be a positive int, got 0
    TypeError nb must be a positive int, got 0.5
    TypeError nb must be a positive int, got True (bool)
    """
    if type(value) is int:  # the commonest case, without the ABC check
        v = value
    elif value is None and allow_none:
        return None
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {_int_expected(minimum, maximum, allow_none)}, "
                        f"got {_shown(value)}")
    else:
        v = int(value)
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        if abs(v).bit_length() <= 80:
            digits = str(v)
        else:  # (10**400 printed 401 digits; past 4300 str() itself raises)
            digits = f"an int of {abs(v).bit_length()} bits"
        raise ValueError(f"{name} must be {_int_expected(minimum, maximum, allow_none)}, "
                         f"got {digits}")
    return v


def check_real(value, name: str, *, minimum: float | None = None, maximum: float | None = None,
               inclusive: tuple[bool, bool] = (True, True), finite: bool = True,
               allow_none: bool = False) -> float | None:
    """``value`` as a Python float within the bounds, or an error that names ``name``.

    Accepts any ``numbers.Real`` (Python ints and floats, numpy integer and float
    scalars, fractions) except ``bool`` and ``numpy.bool_``; strings, complex
    numbers, arrays and None (unless ``allow_none``) are rejected.

    Parameters
    ----------
    value : object
        The argument to check.
    name : str
        The argument's name as the caller knows it; every message starts with it.
    minimum, maximum : float or None
        Bounds; None means unbounded on that side.
    inclusive : (bool, bool)
        Whether ``minimum`` and ``maximum`` themselves are allowed: ``(True, True)``
        for [0, 1], ``(False, False)`` for (0, 1), ``(True, False)`` for [0, 1),
        ``(False, True)`` with ``minimum=0`` alone for "positive".
    finite : bool
        Reject NaN and infinities (NaN fails every bound anyway).
    allow_none : bool
        Whether None is accepted (and returned as None).

    Returns
    -------
    float or None

    Raises
    ------
    TypeError
        If ``value`` is not a real number: ``tol must be a number in (0, 1), got
        '1e-3' (str)``.
    ValueError
        If it is NaN, infinite (with ``finite``) or outside the bounds:
        ``clock_hz must be a positive finite number, got inf``.

    Examples
    --------
    >>> import numpy as np
    >>> check_real(np.float32(0.5), "density", minimum=0, maximum=1)
    0.5
    >>> check_real(3, "velocity", minimum=0, inclusive=(False, True))
    3.0
    >>> for bad in (1.0, float("nan"), "0.1"):
    ...     try:
    ...         check_real(bad, "tol", minimum=0, maximum=1, inclusive=(False, False))
    ...     except (TypeError, ValueError) as exc:
    ...         print(type(exc).__name__, exc)
    ValueError tol must be a number in (0, 1), got 1.0
    ValueError tol must be a number in (0, 1), got nan
    TypeError tol must be a number in (0, 1), got '0.1' (str)
    """
    if value is None and allow_none:
        return None
    if type(value) is float:  # the commonest case, without the ABC check
        v = value
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be "
                        f"{_real_expected(minimum, maximum, inclusive, finite, allow_none)}, "
                        f"got {_shown(value)}")
    else:
        try:
            v = float(value)
        except OverflowError:  # an int beyond float's range
            v = math.inf if value > 0 else -math.inf
    lo_in, hi_in = inclusive
    ok = not finite or math.isfinite(v)
    if ok and minimum is not None:
        ok = v >= minimum if lo_in else v > minimum
    if ok and maximum is not None:
        ok = v <= maximum if hi_in else v < maximum
    if not ok:  # NaN fails every bound: it lands here with bounds or ``finite``
        given = repr(value) if type(value) in (int, float) else repr(v)
        raise ValueError(f"{name} must be "
                         f"{_real_expected(minimum, maximum, inclusive, finite, allow_none)}, "
                         f"got {given}")
    return v


def check_seed(seed, name: str = "seed"):
    """``seed`` as it is if ``numpy.random.SeedSequence`` takes it (None, a nonnegative int
    or a sequence of them), else an error naming ``name``: ValueError for negative ints (as
    numpy's), TypeError for anything else."""
    try:
        np.random.SeedSequence(seed)
    except (TypeError, ValueError):
        try:   # (ints, arrays and ranges of them: a value error, as numpy's)
            kind = np.asarray(seed).dtype.kind
        except (TypeError, ValueError):
            kind = "O"
        raise (ValueError if kind in "iu" else TypeError)(
            f"{name} must be None or a nonnegative int, got {seed!r}") from None
    return seed


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
    if type(x) is np.ndarray and 0 < x.ndim < 3 and x.dtype.char in "fdFD":
        return x  # the commonest case, at no cost
    if x is None:
        raise TypeError(f"{name} is None; expected an array-like operand")
    if sp.issparse(x):  # (np.asarray made it a 0-d object array: "X has dtype object")
        raise TypeError(f"{name} must be dense here, got {describe(x)}; pass "
                        f"{name}.toarray()")
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


def product_shape(sparse_shape: tuple[int, int], dense_shape: tuple[int, ...],
                  transpose: bool) -> tuple[int, ...] | None:
    """Shape of ``S @ D`` (or of ``D @ S`` with ``transpose``), None if the inner sizes differ.

    ``D`` is 1-D or 2-D; a 1-D operand gives a 1-D result, as in numpy.

    Examples
    --------
    >>> product_shape((3, 4), (4, 2), False), product_shape((3, 4), (5, 3), True)
    ((3, 2), (5, 4))
    >>> product_shape((3, 4), (3,), False) is None
    True
    """
    m, k = sparse_shape
    if transpose:
        if dense_shape[-1] != m:
            return None
        return (k,) if len(dense_shape) == 1 else (dense_shape[0], k)
    if dense_shape[0] != k:
        return None
    return (m,) if len(dense_shape) == 1 else (m, dense_shape[1])


def renamed(exc: Exception, name: str) -> Exception:
    """``exc`` from ``CSR(...)`` (whose messages say "A") naming operand ``name``.

    Examples
    --------
    >>> renamed(ValueError("A.data must be 1-D"), "B")
    ValueError('B.data must be 1-D')
    """
    msg = str(exc)
    if name != "A" and (msg.startswith("A ") or msg.startswith("A.")):
        msg = name + msg[1:]
    return type(exc)(msg)


def csr_error_message(code: int, name: str, shape: tuple[int, int], nnz: int,
                      csc: bool = False) -> str:
    """Explain a nonzero return code of the kernels' ``csr_check`` (``CSR_*``, _codes.h).

    ``shape`` is that of the CSR arrays checked; with ``csc`` they are the arrays of a
    CSC operand of shape ``shape[::-1]``, and the message gives that shape and speaks of
    row indices.

    Examples
    --------
    >>> msg = csr_error_message(CSR_BAD_INDEX, "A", (50, 30), 7, csc=True)
    >>> for part in msg.split(": "):
    ...     print(part)
    A has a corrupt compressed structure (30x50, CSC)
    a stored row index is negative or not below 30
    """
    what = "row" if csc else "column"
    reasons = {
        CSR_BAD_START: "indptr[0] is not 0",
        CSR_DECREASING: "indptr decreases somewhere",
        CSR_SHORT: f"indptr[-1] exceeds the number of stored indices ({nnz})",
        CSR_BAD_INDEX: f"a stored {what} index is negative or not below {shape[1]}",
    }
    where = f"{shape[1]}x{shape[0]}, CSC" if csc else f"{shape[0]}x{shape[1]}"
    return f"{name} has a corrupt compressed structure ({where}): {reasons[code]}"


# -- memory -----------------------------------------------------------------

# Planned allocations below this size are not checked: reading /proc/meminfo
# costs microseconds, which small products must not pay on every call.
CHECK_MIN_BYTES = 64 << 20

# (limit, usage, statistics, the statistic of reclaimable page cache): cgroup v2, then v1
_CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current",
                  "/sys/fs/cgroup/memory.stat", "inactive_file"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                  "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                  "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"))


def _read_stat(path: str, key: str) -> int:
    """The value of ``key`` in a cgroup ``memory.stat`` file (lines "key value"), else 0."""
    try:
        with open(path) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def available_memory() -> int | None:
    """Bytes of memory the process can still allocate without swapping, or None.

    ``MemAvailable`` from ``/proc/meminfo`` (Linux), else
    ``SC_AVPHYS_PAGES * SC_PAGE_SIZE``; lowered to the headroom of the memory
    cgroup's limit when one is set: the limit less the usage, where the usage
    leaves out the inactive page cache the kernel reclaims before it fails an
    allocation (the "working set" of docker stats and cAdvisor; after heavy file
    reads the raw usage nears the limit). None when none of these is readable.
    """
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            pass
    for limit_file, usage_file, stat_file, cache_key in _CGROUP_FILES:
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 1 << 60:
            usage = max(0, usage - _read_stat(stat_file, cache_key))
            headroom = max(0, limit - usage)
            avail = headroom if avail is None else min(avail, headroom)
            break
    return avail


def format_bytes(n: int) -> str:
    """``n`` bytes in binary units, e.g. ``'32.0 TiB (35,184,372,088,832 bytes)'``."""
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{value:.1f} {unit} ({n:,} bytes)"


def array_nbytes(shape, dtype) -> int:
    """Bytes of an array of ``shape`` and ``dtype`` (exact Python int, no overflow)."""
    return math.prod(map(int, shape)) * np.dtype(dtype).itemsize


def fits_in_memory(nbytes: int) -> bool:
    """Whether ``nbytes`` more can be allocated (True below ``CHECK_MIN_BYTES`` or if unknown)."""
    if nbytes < CHECK_MIN_BYTES:
        return True
    avail = available_memory()
    return avail is None or nbytes <= avail


def check_allocation(nbytes: int, what: str) -> None:
    """Raise MemoryError now if a planned allocation cannot fit in memory.

    ``what`` names the allocation (with its shape and dtype) in the message.
    Sizes below ``CHECK_MIN_BYTES`` are not checked. An allocation that passes
    can still fail later (other processes allocate too); the point is that an
    absurd request fails at once, with its size and shape, instead of after
    minutes of swapping or at the hands of the OOM killer (Linux overcommits,
    so numpy's own allocation of a too-large array often succeeds).
    """
    if nbytes < CHECK_MIN_BYTES:
        return
    avail = available_memory()
    if avail is not None and nbytes > avail:
        raise MemoryError(f"{what} needs {format_bytes(nbytes)}, more than the "
                          f"{format_bytes(avail)} of memory available")


def check_array_allocation(shape, dtype, what: str) -> None:
    """``check_allocation`` for a new array; the message names ``what``, ``shape`` and ``dtype``.

    Examples
    --------
    >>> check_array_allocation((1000, 4), np.float64, "the result")   # small: not checked
    >>> try:
    ...     check_array_allocation((2**40, 4), np.float64, "the result")
    ... except MemoryError as exc:
    ...     print(str(exc)[:62])
    the result of shape (1099511627776, 4) and dtype float64 needs
    """
    nbytes = array_nbytes(shape, dtype)
    if nbytes >= CHECK_MIN_BYTES:
        shape = tuple(int(s) for s in shape)
        check_allocation(nbytes, f"{what} of shape {shape} and dtype {np.dtype(dtype)}")
