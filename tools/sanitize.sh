#!/usr/bin/env bash
# Build the kernels with AddressSanitizer + UndefinedBehaviorSanitizer in a
# throw-away copy of the working tree and run the kernel tests under them.
#
#   tools/sanitize.sh                       # the kernel tests (below)
#   tools/sanitize.sh tests/tlr/test_matrix.py -k matvec    # any pytest arguments
#
# The copy (tracked and untracked files of the working tree, without build
# products or .git) lives in a temporary directory, so the in-place .so files
# of this tree are left alone; it is deleted afterwards unless KEEP=1.
# Needs gcc (its libasan/libubsan are preloaded into python: the interpreter
# itself is not instrumented) and the test dependencies. Exit status: pytest's.
# Leak detection is off because CPython keeps objects alive until exit.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/wsesparse-sanitize.XXXXXX")"
cleanup() { if [ "${KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT

tar -C "$repo" --exclude=.git --exclude=build --exclude=.venv --exclude='*.so' \
    --exclude='_kernels/*.c' --exclude=__pycache__ --exclude=.hypothesis \
    --exclude=.pytest_cache --exclude=.asv -cf - . | tar -C "$work" -xf -
cd "$work"

echo "building with -fsanitize=address,undefined in $work ..."
WSESPARSE_SANITIZE=address,undefined python setup.py build_ext --inplace >build.log 2>&1 \
    || { cat build.log; exit 1; }

if [ "$#" -eq 0 ]; then
    # The RSS test is left out: ASan holds freed memory in its quarantine (by
    # design, to catch use-after-free), so the resident set grows under it.
    set -- tests/matmul tests/test_csr.py tests/test_structure.py tests/kernels \
        tests/test_drivers.py tests/test_fuzz.py tests/test_threads.py tests/test_checks.py \
        tests/tlr tests/wafer \
        --deselect tests/matmul/test_memory.py::test_no_leak_over_many_calls
fi
cc="${CC:-gcc}"
LD_PRELOAD="$("$cc" -print-file-name=libasan.so):$("$cc" -print-file-name=libubsan.so)" \
ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
PYTHONPATH="$work" python -m pytest -q -p no:cacheprovider "$@"
