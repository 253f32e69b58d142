"""Reading and writing a :class:`~wsesparse.TLRMatrix` as an ``.npz`` file.

:meth:`TLRMatrix.save <wsesparse.TLRMatrix.save>` and
:meth:`TLRMatrix.load <wsesparse.TLRMatrix.load>` call :func:`save` and
:func:`load`; ``load`` takes the class to build, so this module does not
import the matrix module.
"""

from __future__ import annotations

import io
import os

import numpy as np

from wsesparse._checks import describe

__all__ = ["save", "load"]


def save(T, file) -> None:
    """Write ``T`` to an ``.npz`` file (bases, ranks, shape, nb, tol).

    ``file`` is a path (str, bytes or path-like), written as given (numpy's ``savez``
    would append ``.npz`` to a name without it, so that :func:`load` of the same path
    failed), or a binary file object.

    Examples
    --------
    >>> import numpy as np
    >>> from io import BytesIO
    >>> from wsesparse import TLRMatrix
    >>> from wsesparse.tlr import io as tlr_io
    >>> T = TLRMatrix.from_dense(np.ones((6, 5)), nb=4, tol=1e-6)
    >>> buf = BytesIO()
    >>> tlr_io.save(T, buf)
    >>> _ = buf.seek(0)
    >>> S = tlr_io.load(TLRMatrix, buf)
    >>> bool((S.toarray() == T.toarray()).all()), S.tol
    (True, 1e-06)
    """
    fields = dict(U=T.U, V=T.V, ranks=T.ranks, shape=np.array(T.shape), nb=np.array(T.nb),
                  tol=np.array(np.nan if T.tol is None else T.tol),
                  format=np.array("wsesparse.TLRMatrix/1"))
    if isinstance(file, (str, bytes, os.PathLike)):
        with open(file, "wb") as f:
            np.savez(f, **fields)
    else:
        np.savez(file, **fields)


def load(cls, file):
    """Read what :func:`save` wrote and build ``cls(shape, nb, ranks, U, V, tol)``.

    ``cls`` is :class:`~wsesparse.TLRMatrix` (or a subclass); its constructor
    rebuilds and checks the layout (and takes bases in the other byte order into native
    copies). ``file`` is a path or a binary file object; one that cannot seek (a pipe,
    a socket) is read whole first, as the ``.npz`` archive is read by seeking.

    Raises
    ------
    TypeError
        ``file`` is neither a path nor a binary file object.
    FileNotFoundError, IsADirectoryError, PermissionError
        As ``open`` does for a path that cannot be read.
    ValueError
        Anything that is not an intact file written by :func:`save`
        (empty, truncated, another format, missing or malformed fields,
        ranks or bases that do not fit together).
    """
    if not isinstance(file, (str, bytes, os.PathLike)) and not hasattr(file, "read"):
        raise TypeError(f"file must be a path or a binary file object, got {describe(file)}")

    name = file   # (as the caller gave it, in the messages)

    def bad(why: str) -> ValueError:
        return ValueError(f"{name!r} is not a TLRMatrix file written by TLRMatrix.save: {why}")

    if hasattr(file, "read") and callable(getattr(file, "seekable", None)) and not file.seekable():
        # (save writes to pipes and sockets; an .npz archive is read by seeking)
        file = io.BytesIO(file.read())

    # A damaged archive or .npy header raises many kinds of error in zipfile and numpy
    # (BadZipFile, EOFError, TokenError, NotImplementedError for an unknown zip version,
    # RuntimeError for an "encrypted" entry, ...): all are this file's fault, except the
    # OS's refusals and running out of memory.
    try:
        z = np.load(file, allow_pickle=False)
    except (FileNotFoundError, IsADirectoryError, PermissionError, MemoryError):
        raise
    except Exception as exc:
        if "pickle" in str(exc):  # (numpy takes what is neither .npz nor .npy for a pickle)
            raise bad("not an .npz archive") from None
        raise bad(f"{type(exc).__name__}: {exc}") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise bad(f"it holds a single {describe(z)}, not an .npz archive")
    with z:
        fields = ("format", "shape", "nb", "ranks", "U", "V", "tol")
        missing = [k for k in fields if k not in z.files]
        if missing:
            raise bad(f"missing {missing}" if "format" not in missing else "no format tag")
        try:
            d = {k: z[k] for k in fields}
        except MemoryError:
            raise
        except Exception as exc:
            raise bad(f"{type(exc).__name__}: {exc}") from None
    if d["format"].shape != () or str(d["format"]) != "wsesparse.TLRMatrix/1":
        raise bad(f"format tag {d['format']!r}")
    shape, nb, tol = d["shape"], d["nb"], d["tol"]
    if shape.shape != (2,) or shape.dtype.kind not in "iu":
        raise bad(f"shape must be 2 ints, got {describe(shape)}")
    if nb.shape != () or nb.dtype.kind not in "iu":
        raise bad(f"nb must be one int, got {describe(nb)}")
    if tol.shape != () or tol.dtype.kind != "f":
        raise bad(f"tol must be one float, got {describe(tol)}")
    tol = float(tol)
    if not (np.isnan(tol) or 0 <= tol < np.inf):  # (NaN: saved from tol=None)
        raise bad(f"tol must be a finite float >= 0 or NaN, got {tol}")
    T = cls(tuple(int(v) for v in shape), int(nb), d["ranks"], d["U"], d["V"],
            None if np.isnan(tol) else tol)
    if not (np.isfinite(T.U).all() and np.isfinite(T.V).all()):
        raise bad("the bases contain NaN or inf")
    return T
