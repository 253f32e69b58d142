"""Build script for the Cython/OpenMP kernels of wsesparse.

Every ``_kernels/<name>.pyx`` is compiled into ``wsesparse._kernels.<name>``.

Environment switches (read at build time):

``WSESPARSE_OPENMP=0``
    build without OpenMP (kernels run on one thread).
``WSESPARSE_NATIVE=0``
    do not tune for the build machine (no ``-march=native``); use this when
    the built package is copied to other machines.
``WSESPARSE_SANITIZE=address,undefined``
    build with the given GCC/Clang sanitizers (debug aid; see docs/development.md).
"""

from __future__ import annotations

import os
import platform
import re
import sys
from glob import glob
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

_X86 = ("x86_64", "amd64", "i386", "i686")

HERE = Path(__file__).resolve().parent


def _flag(name: str, default: str) -> bool:
    return os.environ.get(name, default).strip().lower() not in {"0", "false", "no", "off", ""}


def _compile_and_link_args() -> tuple[list[str], list[str]]:
    compile_args: list[str] = []
    link_args: list[str] = []
    if sys.platform == "win32":
        compile_args += ["/O2"]
        if _flag("WSESPARSE_OPENMP", "1"):
            compile_args.append("/openmp")
        return compile_args, link_args
    compile_args += ["-O3", "-fno-math-errno", "-fcx-limited-range"]
    if _flag("WSESPARSE_NATIVE", "1"):
        # The package is built from source on the machine that runs it, so the
        # kernels may use every vector extension that machine has.
        compile_args += ["-march=native"]
    if _flag("WSESPARSE_OPENMP", "1"):
        omp = ["-Xpreprocessor", "-fopenmp"] if sys.platform == "darwin" else ["-fopenmp"]
        compile_args += omp
        link_args += ["-lomp"] if sys.platform == "darwin" else ["-fopenmp"]
    sanitize = os.environ.get("WSESPARSE_SANITIZE", "").strip()
    if sanitize:
        san = [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-g"]
        compile_args = [a for a in compile_args if a != "-O3"] + ["-O1"] + san
        link_args += san
    return compile_args, link_args


def _jobs() -> int:
    """The cores this build may use (the affinity mask, where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _headers(pyx: str) -> set[str]:
    """The _kernels/ headers a module's C file includes: its own ``cdef extern
    from`` blocks and those of the .pxd files it cimports (and they cimport)."""
    headers: set[str] = set()
    seen: set[str] = set()
    todo = [Path(pyx)]
    while todo:
        text = todo.pop().read_text()
        headers.update(re.findall(r'^\s*cdef extern from "([^"]+)"', text, re.M))
        for mod in re.findall(r"^\s*(?:from\s+(\w+)\s+cimport|cimport\s+(\w+))", text, re.M):
            pxd = Path("_kernels") / f"{mod[0] or mod[1]}.pxd"
            if pxd.name not in seen and pxd.exists():
                seen.add(pxd.name)
                todo.append(pxd)
    return headers


def _extensions() -> list[Extension]:
    compile_args, link_args = _compile_and_link_args()
    exts = []
    for pyx in sorted(glob("_kernels/*.pyx")):
        name = Path(pyx).stem
        extra = []
        if (any(h in ("_axpy_tiles.h", "_krylov.h") or h.startswith("_tiles_")
                for h in _headers(pyx))
                and sys.platform != "win32"):
            # The kernels of _axpy_tiles.h (_tiles_*.h) write their fused multiply-adds out:
            # GCC's own contraction fused the same line in one inlined copy and
            # not in another, so one row could sum to different bits. _krylov.h's updates
            # round as numpy's two steps do (alpha * p, then the sum), which GCC fused.
            extra = ["-ffp-contract=off"]
            if name == "_krylov" and platform.machine().lower() in _X86:
                # GCC 12 still fuses complex products into vfmaddsub (its VEC_FMADDSUB
                # pattern ignores -ffp-contract=off) in the vectorised body but not in a
                # loop's scalar remainder, so an element's bits depended on where a thread's
                # range began (complex64 bicgstab, a review). These memory-bound passes
                # need no FMA; AVX-512F has its own, so it goes too.
                extra += ["-mno-fma", "-mno-avx512f"]
        exts.append(
            Extension(
                f"wsesparse._kernels.{name}",
                sources=[pyx],
                include_dirs=[np.get_include(), "_kernels"],
                # Rebuild when a header or a shared declaration or include changes.
                depends=sorted(glob("_kernels/*.h") + glob("_kernels/*.pxd")
                               + glob("_kernels/*.pxi")),
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
                extra_compile_args=compile_args + extra,
                extra_link_args=link_args,
            )
        )
    return cythonize(
        exts,
        # The .pxd files beside the .pyx (shared declarations: ``from _types cimport ...``).
        include_path=["_kernels"],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "initializedcheck": False,
            "cdivision": True,
        },
        nthreads=_jobs(),
    )


setup(
    ext_modules=_extensions(),
    # Compile the extension modules side by side (as ``build_ext -j``; an explicit ``-j`` on the
    # command line wins): pip builds them on every install, 109 s one by one against 59 s on
    # two cores (docs/development.md, "Build time").
    options={"build_ext": {"parallel": _jobs()}},
)
