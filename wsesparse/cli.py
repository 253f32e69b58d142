"""Command-line entry point: ``wsesparse <subcommand> ...``.

Each subcommand lives in the module that implements it; that module exposes
``register(subparsers)``, which adds its parser and sets ``func`` (called with
the parsed namespace, returns an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# Modules that contribute subcommands, in the order --help lists them.
_SUBCOMMAND_MODULES = (
    "wsesparse.demo",
    "wsesparse.wafer.cli",
    "wsesparse.curve",
    "wsesparse.bench",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``wsesparse`` command."""
    parser = argparse.ArgumentParser(
        prog="wsesparse",
        description="Sparse kernels on the CPU and a wafer-scale execution model of the same algorithm.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``wsesparse`` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (``wsesparse simulate ... | head -1``): no error message,
        # and stdout pointed elsewhere so that flushing it at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (ValueError, TypeError, OSError, MemoryError) as exc:
        # (MemoryError: the checked allocations name what was too big)
        print(f"wsesparse {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
