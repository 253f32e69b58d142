"""Progress bars on stderr for sweeps, benchmarks and long compressions (private).

Shown only when asked (``--progress``, ``progress=True``) or, for the command-line tools,
when stderr is a terminal, so that redirected or captured output carries no progress noise.
tqdm draws the bar if it is installed; otherwise a one-line text bar is redrawn with ``\\r``.
"""

from __future__ import annotations

import sys
import time

_MIN_INTERVAL = 0.1  # seconds between two redraws of the text bar (the last one always shows)


def progress_enabled(flag: bool | None, stream=None) -> bool:
    """``flag`` if it is True or False; for None, whether ``stream`` (default stderr) is a TTY.

    Examples
    --------
    >>> import io
    >>> progress_enabled(None, io.StringIO()), progress_enabled(True, io.StringIO())
    (False, True)
    """
    if flag is not None:
        return bool(flag)
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def add_progress_argument(parser) -> None:
    """``--progress`` / ``--no-progress`` (default: only when stderr is a terminal)."""
    import argparse
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: only when stderr is a terminal)")


def _tqdm():
    try:
        import tqdm
    except ImportError:
        return None
    return tqdm


class Progress:
    """A progress bar over ``total`` steps on stderr; a no-op unless ``enabled``.

    ``step(k)`` advances it; ``write(line)`` prints a line (to stdout by default) without
    mangling the bar (the bar is erased and drawn again at the next step); ``close()`` (or
    leaving the ``with`` block) ends its line.
    """

    def __init__(self, total: int, enabled: bool, label: str = "", unit: str = "steps"):
        self.total, self.enabled, self.label, self.unit = int(total), bool(enabled), label, unit
        self.done, self.t0 = 0, time.perf_counter()
        self._stream = sys.stderr
        self._bar = None
        self._width = 0          # length of the text bar last drawn (0: none on screen)
        self._last_draw = -1.0
        self._redraw = False
        self._closed = not self.enabled
        if self.enabled:
            tqdm = _tqdm()
            if tqdm is not None:
                self._bar = tqdm.tqdm(total=self.total, desc=label or None, unit=" " + unit,
                                      file=self._stream, leave=True)
            else:
                self._draw(force=True)  # 0/total at once: the first step may take long

    # -------------------------------------------------------------- drawing
    def _line(self) -> str:
        frac = self.done / max(self.total, 1)
        bar = "#" * int(30 * min(frac, 1.0))
        return (f"{self.label} [{bar:<30}] {self.done}/{self.total} {self.unit} "
                f"{time.perf_counter() - self.t0:.1f}s")

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last_draw < _MIN_INTERVAL and self.done < self.total:
            return
        line = self._line()
        self._stream.write("\r" + line + " " * max(0, self._width - len(line)))
        self._width = len(line)
        self._last_draw = now
        if self.done >= self.total:
            self._stream.write("\n")
            self._width = 0
            self._closed = True
        self._stream.flush()

    def _erase(self) -> None:
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0

    # -------------------------------------------------------------- API
    def step(self, k: int = 1) -> None:
        if self._closed:
            return
        self.done += k
        if self._bar is not None:
            self._bar.update(k)
            if self.done >= self.total:
                self.close()
        else:
            self._draw(force=self._redraw)
            self._redraw = False

    def write(self, line: str, file=None) -> None:
        """Print ``line`` to ``file`` (default stdout), keeping the bar below it."""
        file = sys.stdout if file is None else file
        if self._closed:
            print(line, file=file, flush=True)
        elif self._bar is not None:
            self._bar.write(line, file=file)
        else:
            self._erase()
            print(line, file=file, flush=True)
            self._redraw = True  # the next step draws the bar again, below the line

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._width or self._redraw:
            self._draw(force=True)  # the last state stays on screen (and in a log)
            if self.done < self.total:
                self._stream.write("\n")
                self._stream.flush()
            self._width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
