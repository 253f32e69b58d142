#!/usr/bin/env bash
# Build wsesparse in place, run the gpu-marked tests and `wsesparse bench --gpu` on a CUDA
# machine, in one go (a lent GPU's time is short). Logs and JSON under $OUT (default gpu-out).
#   TESTS=0 / BENCH=0 skip a part; BENCH_ARGS adds options to the bench (e.g. --gpu-skip-tlr).
#   CPU_BENCH=1 also times the CPU side on all the machine's cores (the lent machines have
#   16: issues #27, #28, #24 ask for 16-core figures); not yet run there. With the GPU parts
#   off (TESTS=0 BENCH=0) it runs on any machine, e.g. as a second call on a warm device.
#   PY names the interpreter (default python3: on the lent machines the one with cupy, torch,
#   threadpoolctl and scikit-learn).
set -u
OUT=${OUT:-gpu-out}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm \
    --format=csv > "$OUT/nvidia-smi.txt" 2>&1
cat "$OUT/nvidia-smi.txt"
start=$(date +%s)
if ! "$PY" setup.py build_ext --inplace -j 16 > "$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log"
    exit 1
fi
echo "built in $(( $(date +%s) - start )) s"
if [ "${TESTS:-1}" != 0 ]; then
    timeout "${TEST_TIMEOUT:-240}" "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/gpu \
        > "$OUT/tests.log" 2>&1
    echo "tests rc $? after $(( $(date +%s) - start )) s"
    grep -E "passed|failed|error" "$OUT/tests.log" | tail -3
    grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -30
fi
if [ "${BENCH:-1}" != 0 ]; then
    timeout "${BENCH_TIMEOUT:-300}" "$PY" -m wsesparse bench --gpu --json "$OUT/bench.json" \
        ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
    echo "bench rc $? after $(( $(date +%s) - start )) s"
    cat "$OUT/bench.log"
fi
if [ "${CPU_BENCH:-0}" != 0 ]; then
    # Issue #27's grid (one-shot against prepared and the peers installed there), the
    # prepared kernels' scaling over 1, 2, 4, 8, all threads, then #28's workflows and #24's
    # TLR rates. Each part has its own timeout, so one slow part does not cost the others.
    grid="--sizes 16384 --tokens 1,8,64,256 --densities 0.1,0.01,0.001 --dtypes float32,float64"
    timeout "${CPU_TIMEOUT:-240}" "$PY" -m wsesparse bench $grid --budget 0.3 --no-progress \
        > "$OUT/cpu-grid.log" 2>&1
    echo "cpu grid rc $?"; tail -40 "$OUT/cpu-grid.log"
    timeout "${CPU_TIMEOUT:-240}" "$PY" benchmarks/scaling.py $grid --budget 0.15 \
        > "$OUT/cpu-scaling.log" 2>&1
    echo "cpu scaling rc $?"; cat "$OUT/cpu-scaling.log"
    timeout "${CPU_TIMEOUT:-240}" "$PY" -m wsesparse bench --workflows --no-progress \
        > "$OUT/cpu-workflows.log" 2>&1
    echo "cpu workflows rc $?"; tail -25 "$OUT/cpu-workflows.log"
    timeout "${CPU_TIMEOUT:-240}" "$PY" -m wsesparse bench --tlr --cache-grid none \
        --no-progress > "$OUT/cpu-tlr.log" 2>&1
    echo "cpu tlr rc $?"; tail -25 "$OUT/cpu-tlr.log"
fi
