#!/usr/bin/env bash
# Build wsesparse in place, run the gpu-marked tests and `wsesparse bench --gpu` on a CUDA
# machine, in one go (a lent GPU's time is short). Logs and JSON under $OUT (default gpu-out;
# at most 7 files, since a lent machine returns 8).
#   TESTS=0 / BENCH=0 skip a part; BENCH_ARGS adds options to the bench (e.g. --gpu-skip-tlr).
#   VEC=1 also runs benchmarks/gpu_spmv_vec.py (issue #23's long-row SpMV, csr_spmv4, against
#   csr_dense).
#   CPU_BENCH lists CPU parts to time on all the machine's cores (the lent machines have 16:
#   issues #27, #28, #24 ask for 16-core figures): any of grid, scaling, workflows, tlr, cold,
#   transposed, zones, runs (Intel's SpMV run rule against a build without it:
#   kernel_ab.py, B / A > 1 where the rule helps), tlr_ab (the TLR forward in zmm against
#   32 bytes throughout: kernel_ab.py --set tlr, B / A > 1 where zmm helps), tlr_tiles (the
#   same for the several-vector tiles only: TLR_NN_ZMM_TILES=0), queues (the SpMV and SpMM
#   parts from one shared queue against a queue per thread: WS_PARTS_SHARED=1, B / A > 1
#   where the own queues help), tlr_queues (the same for the TLR phases' work items), trace
#   (where a 16-thread SpMV or SpMM loses against 1/16 of one thread: part_trace.py),
#   tlr_trace (the same for the TLR forward and adjoint, phase by phase, and the forward with
#   the work items of the rule before session 50: part_trace.py --tlr --previous-cut), blas
#   (the workflows under accelerated() with BLAS on one thread against BLAS on the kernels'
#   threads: blas_modes.py), cgbound (how far routing products can take scipy's cg, #28:
#   cg_bound.py), or 1 for the first five; CPU_TIMEOUT
#   bounds each. With the GPU parts off (TESTS=0 BENCH=0) it runs on any machine, e.g. as a
#   second call on a warm device.
#   PY names the interpreter (default python3: on the lent machines the one with cupy, torch,
#   threadpoolctl and scikit-learn).
set -u
OUT=${OUT:-gpu-out}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|L2|L3|NUMA node\(s\))" 
grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort | uniq -c
start=$(date +%s)
if ! "$PY" setup.py build_ext --inplace -j "$(nproc)" > "$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log"
    exit 1
fi
echo "built in $(( $(date +%s) - start )) s"
"$PY" -c "from wsesparse._kernels import _spmm; print('kernels built for', _spmm.KERNEL_ISA)"
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
if [ "${VEC:-0}" != 0 ]; then
    timeout "${VEC_TIMEOUT:-180}" env PYTHONPATH=. "$PY" benchmarks/gpu_spmv_vec.py \
        > "$OUT/vec.log" 2>&1
    echo "vec rc $? after $(( $(date +%s) - start )) s"
    cat "$OUT/vec.log"
fi
parts=${CPU_BENCH:-0}
[ "$parts" = 1 ] && parts="grid scaling workflows tlr cold"
[ "$parts" = 0 ] && parts=""
# Issue #27's grid (one-shot against prepared and the peers installed there), the prepared
# kernels' scaling over 1, 2, 4, 8, all threads, #28's workflows, #24's TLR rates and small
# products called 0.1 s apart (the idle-spell rule, COLD_TEAM_SECONDS, on both sides of its
# 16-thread limit cold_max_work(16) = 2^19: session 21's 7 rounds of 4 points and 2 dtypes
# outran 100 s there); all in one log.
# Each part has its own timeout, so one slow part does not cost the others.
grid="--sizes 16384 --tokens 1,8,64,256 --densities 0.1,0.01,0.001 --dtypes float32,float64"
for part in $parts; do
    case $part in
        grid) cmd=(-m wsesparse bench $grid --budget 0.3 --no-progress) ;;
        scaling) cmd=(benchmarks/scaling.py $grid --budget 0.15 --references) ;;
        workflows) cmd=(-m wsesparse bench --workflows --no-progress) ;;
        tlr) cmd=(-m wsesparse bench --tlr --cache-grid none --no-progress) ;;
        cold) cmd=(benchmarks/small_products.py --gap 0.1 --rounds 5 --tokens 1,8
                   --dtypes float64 --work 262144,524288,1048576,2097152) ;;
        transposed) cmd=(benchmarks/transposed.py --budget 0.1 --rounds 2) ;;
        zones) cmd=(benchmarks/scatter_zones.py) ;;
        runs) cmd=(benchmarks/kernel_ab.py --set rows --cflags=-DWS_SPMV_RUN_SCALAR=0
                   --threads "1,$(nproc)" --rounds 5) ;;
        tlr_ab) cmd=(benchmarks/kernel_ab.py --set tlr --cflags=-DTLR_NO_ZMM
                     --threads "1,$(nproc)" --rounds 5) ;;
        tlr_tiles) cmd=(benchmarks/kernel_ab.py --set tlr --cflags=-DTLR_NN_ZMM_TILES=0
                        --threads "1,$(nproc)" --rounds 5) ;;
        queues) cmd=(benchmarks/kernel_ab.py --cflags=-DWS_PARTS_SHARED=1 --modules _spmm
                     --threads "8,$(nproc)" --rounds 5) ;;
        tlr_queues) cmd=(benchmarks/kernel_ab.py --set tlr --cflags=-DWS_PARTS_SHARED=1
                         --modules _tlrmvm --threads "1,$(nproc)" --rounds 5) ;;
        trace) cmd=(benchmarks/part_trace.py --sizes 16384 --densities 0.01,0.001
                    --tokens 1,8,64 --dtypes float32,float64 --calls 21) ;;
        tlr_trace) cmd=(benchmarks/part_trace.py --tlr --grids 49x51,99x99 --vectors 1,16,64
                        --calls 11 --previous-cut) ;;
        blas) cmd=(benchmarks/blas_modes.py --rounds 3) ;;
        cgbound) cmd=(benchmarks/cg_bound.py) ;;
        *) echo "unknown CPU part $part"; continue ;;
    esac
    echo "== cpu $part: ${cmd[*]}" >> "$OUT/cpu.log"
    timeout "${CPU_TIMEOUT:-240}" "$PY" "${cmd[@]}" >> "$OUT/cpu.log" 2>&1
    echo "cpu $part rc $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/cpu.log"
done
[ -f "$OUT/cpu.log" ] && cat "$OUT/cpu.log"
exit 0
