#!/usr/bin/env bash
# One call on the GPU machine: install cudalab and pycuda (wheels in .wheelhouse), run the GPU tests
# and the benchmarks, keep logs and JSON under $OUT, print a short table last.
#
#   bash scripts/gpu-check.sh [STAGE...]   stages: info tests ncu sanitizer bench hostile largest roofline
#                                          examples newuser badgpu printf tune roofline truth
#                                          cluster occ
#                                          (default: info tests ncu sanitizer bench)
#
# Each stage's log goes to $OUT/<stage>.log; the benchmark record to $OUT/bench/. A stage is stopped
# after $STAGE_TIMEOUT seconds (default 480) so one hang cannot eat the whole lease. Extra pytest
# arguments for the test stages: $PYTEST_ARGS (e.g. "-x -k transpose").
set -u -o pipefail
OUT=${OUT:-/tmp/cudalab-out}
mkdir -p "$OUT"
if ! python3 -c "import pycuda, cudalab" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl || exit 2
    python3 -m pip install -q --no-index --no-build-isolation -e '.[gpu,test]' || exit 2
fi
export PYTHONUNBUFFERED=1 LC_ALL=C
stages=${*:-"info tests ncu sanitizer bench"}
limit=${STAGE_TIMEOUT:-480}
summary=()
for stage in $stages; do
    t0=$(date +%s)
    case $stage in
        info) nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
              python3 -m cudalab info ;;
        tests) timeout -s KILL "$limit" python3 -m pytest -m "gpu" -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} ;;
        ncu) timeout -s KILL "$limit" python3 -m pytest -m "ncu" -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} ;;
        sanitizer) timeout -s KILL "$limit" python3 -m pytest -m "sanitizer" -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} ;;
        bench) timeout -s KILL "$limit" python3 scripts/benchmark.py --out "$OUT/bench" ${BENCH_ARGS:-} ;;
        # the README's run: every hostile kernel beside the ladder's bankopt and a correct kernel
        hostile) timeout -s KILL "$limit" env COLUMNS=200 python3 -m cudalab transpose --n 4096 --variant bankopt \
                     $(for k in hostile_oob hostile_trap hostile_hang hostile_misaligned; do
                           echo --add docs/examples/hostile.cu:$k@block=32x8; done) \
                     --add docs/examples/hostile.cu:hostile_smem@block=32x8,shared=1048576 \
                     --add docs/examples/my_transpose.cu:my_transpose@block=32x8,tile=32x32 --timeout 5 \
                     --json "$OUT/hostile.json" ;;
        # issue 45: the measured ceilings (cached for the charts), occupancy against ncu for every built-in
        # variant, the two ladders' runs and charts (docs/plots/), and the README's sass outputs
        roofline) ( python3 -m pytest -q -p no:cacheprovider -rs -s tests/test_ceilings_gpu.py
                    timeout -s KILL 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_occupancy_gpu.py
                    python3 -c 'from cudalab.inspect import ceilings as C; from cudalab.worker import ceilings, gpu; d = gpu.Device(0); c = ceilings.measure(d); C.store(c); print(c, "->", C.cache_file(c.gpu, c.sm_clock_mhz)); d.close()'
                    COLUMNS=200 python3 -m cudalab transpose --n 16384 --json "$OUT/h100-transpose-16384.json"
                    COLUMNS=200 python3 -m cudalab matmul --n 4096 --json "$OUT/h100-matmul-4096.json"
                    python3 -m cudalab roofline "$OUT/h100-transpose-16384.json" -o "$OUT/transpose-roofline.png"
                    python3 -m cudalab roofline "$OUT/h100-transpose-16384.json" -o "$OUT/transpose-roofline.html"
                    python3 -m cudalab roofline "$OUT/h100-matmul-4096.json" "$OUT/h100-transpose-16384.json" \
                        -o "$OUT/matmul-roofline.png"
                    python3 -m cudalab roofline "$OUT/h100-matmul-4096.json" "$OUT/h100-transpose-16384.json" \
                        -o "$OUT/matmul-roofline.html"
                    for v in "transpose --variant block,bankopt" "matmul --variant tiled,regblock --no-listing"; do
                        python3 -m cudalab sass $v >/dev/null   # warm the disassembly cache
                        echo "=== cudalab sass $v"; ( time COLUMNS=160 python3 -m cudalab sass $v ) 2>&1; done ) ;;
        # issue 47 item 15: a kernel's 2,560 printf lines a launch: five under its row, every line in the JSON
        printf) timeout -s KILL 300 python3 -m pytest -q -p no:cacheprovider -rs -s tests/test_printf.py
                COLUMNS=160 python3 -m cudalab transpose --n 1024 --variant naive --min-samples 1 --budget 0.001 \
                    --add docs/examples/my_printf.cu:my_printf@block=32x8,tile=32x32 --json "$OUT/printf.json" ;;
        # the memory plan's largest transpose: runs with its roofline, or is refused before GPU work
        largest) timeout -s KILL "$limit" python3 scripts/largest_transpose.py --json "$OUT/largest.json" ;;
        # the three examples: run, ncu (each set of $EXAMPLE_METRICS), ncu --source, compute-sanitizer
        # ($EXAMPLE_PARTS picks: run ncu source sanitize)
        examples) for f in softmax scan histogram; do
                      case $f in softmax) size="--shape 2048x1024";; *) size="--n 2^22";; esac
                      for part in ${EXAMPLE_PARTS:-run ncu source sanitize}; do case $part in
                          run) echo "=== $f run"; CUDALAB_PATH=examples timeout -s KILL 120 env COLUMNS=160 \
                                   python3 -m cudalab $f --json "$OUT/ex-$f.json" ;;
                          ncu) for m in ${EXAMPLE_METRICS:-smem memory time tensor}; do echo "=== $f ncu --metrics $m"
                                   CUDALAB_PATH=examples timeout -s KILL 120 env COLUMNS=160 python3 -m cudalab ncu $f $size --metrics $m; done ;;
                          source) echo "=== $f ncu --source"; CUDALAB_PATH=examples timeout -s KILL 120 env COLUMNS=160 \
                                   python3 -m cudalab ncu $f $size --source --lines 4 ;;
                          sanitize) echo "=== $f sanitize"; CUDALAB_PATH=examples timeout -s KILL 240 env COLUMNS=160 \
                                   python3 -m cudalab sanitize $f --tool ${EXAMPLE_TOOLS:-all} ;;
                      esac; done
                  done ;;
        # a new user: the wheel (built here into .dist/ and carried) installed on its own into a folder first on
        # the path (no package index there: its dependencies are the machine's), an empty folder, a problem
        # written from the README alone (docs/new-user/stencil)
        newuser) ( set -e; rm -rf /tmp/nu; python3 -m pip install -q --no-index --no-deps --target /tmp/nu .dist/cudalab-*.whl
                   d=$(mktemp -d); cp -r docs/new-user/stencil "$d/"; cd "$d"; export PYTHONPATH=/tmp/nu
                   python3 -c 'import cudalab; print("cudalab from", cudalab.__file__)'
                   CUDALAB_PATH=. timeout -s KILL 120 env COLUMNS=160 python3 /tmp/nu/bin/cudalab stencil
                   CUDALAB_PATH=. timeout -s KILL 120 env COLUMNS=160 python3 /tmp/nu/bin/cudalab stencil --shape 1000x777 ) ;;
        # inputs only a GPU machine judged before: each one line, exit 2, before any GPU work
        badgpu) for args in "transpose --variant block -D ROWS=0" "transpose --budget nan" "transpose --seed -1" \
                            "reduce --budget inf" "transpose --variant block -D TILE=1%0"; do
                    echo "=== cudalab $args"; timeout -s KILL 60 python3 -m cudalab $args --n 1024; echo "exit $?"; done ;;
        # issue 43: cudalab tune's ground truth, replay, trust and kernel_tuner (scripts/bench_tune.py); the
        # record and the campaigns under $OUT/tune-docs (copy them to docs/benchmarks/). Sized by $TUNE_ARGS
        # (e.g. "--spaces reduce-modern --trials 120 --repeats 3 --seconds 0.05"); kernel_tuner from
        # $KERNEL_TUNER (a folder it imports from), else that part is skipped, saying so.
        tune) python3 -c 'import optuna' 2>/dev/null || python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl
              # kernel_tuner 1.5 and what it needs beyond the machine's packages, as wheels in .wheelhouse/kt/
              if [ -z "${KERNEL_TUNER:-}" ] && ls .wheelhouse/kt/*.whl >/dev/null 2>&1; then
                  python3 -m pip install -q --no-index --no-deps --target /tmp/kt .wheelhouse/kt/*.whl && KERNEL_TUNER=/tmp/kt
              fi
              timeout -s KILL "$limit" python3 scripts/bench_tune.py --out "$OUT/tune-docs" \
                  ${KERNEL_TUNER:+--kernel-tuner "$KERNEL_TUNER"} ${TUNE_ARGS:-} ;;
        # issues 44 and 48: a tune campaign without a cluster, on one GPU and on every GPU through --cluster local
        # (a Dask worker SIGKILLed mid-campaign), the record <gpu>-xN-cluster.md/.json under $OUT/cluster-docs; then a
        # sweep with and without --cluster local, compared
        cluster) ( timeout -s KILL "$limit" python3 scripts/bench_cluster_gpu.py --trials "${CLUSTER_TRIALS:-40}" \
                       --out "$OUT/cluster-docs" --work "$OUT/cluster-work" ${CLUSTER_ARGS:-}
                   for how in plain cluster; do
                       extra=(); [ $how = cluster ] && extra=(--cluster local --devices all)
                       timeout -s KILL 240 env COLUMNS=200 python3 -m cudalab transpose --n 4096,8192 \
                           --variant naive,block,bankopt,vec4-band "${extra[@]}" --json "$OUT/sweep-$how.json"; done
                   COLUMNS=200 python3 -m cudalab compare "$OUT/sweep-plain.json" "$OUT/sweep-cluster.json" ) ;;
        # issue 45: copy/naive's registers and occupancy limits as ncu sees them, against cudalab compile
        occ) ( COLUMNS=200 python3 -m cudalab compile copy --variant naive
               timeout -s KILL 120 ncu --target-processes all -k regex:copy_naive --launch-count 2 --metrics \
                   launch__registers_per_thread,launch__block_size,launch__occupancy_limit_registers,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,launch__occupancy_limit_shared_mem,launch__occupancy_per_block_size,sm__maximum_warps_per_active_cycle_pct \
                   python3 -m cudalab copy --variant naive --n 1024 --min-samples 1 --budget 0.001 --no-roofline
               python3 - <<'PY'
# the driver's own occupancy of an 8-register kernel at 1024 threads (copy_naive's shape), against 65536 / (8 * 1024)
import ctypes
import cupy as cp
k = cp.RawKernel(r"""extern "C" __global__ void k(float *o, const float *a, int r, int c, int p) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < c && y < r) o[(size_t)y * p + x] = a[(size_t)y * p + x]; }""", "k")
k.compile()
cuda = ctypes.CDLL("libcuda.so.1")
for threads in (1024, 256):
    n = ctypes.c_int()
    rc = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), ctypes.c_void_p(k.kernel.ptr), threads,
                                                         ctypes.c_size_t(0))
    print(f"probe kernel: {k.num_regs} registers; driver: {n.value} blocks/SM at {threads} threads (rc {rc})")
PY
               timeout -s KILL 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_occupancy_gpu.py ) ;;
        # issue 46: cudalab truth of short built-in kernels against ncu (cold, hot), calibrate's A/A pairs (as many
        # as fit in --calibrate-seconds) and a run beside a heater (throttled samples): ~6 min of GPU by default.
        # The record goes to $OUT/truth-docs (copy it to docs/benchmarks/). Parts and sizes: $TRUTH_ARGS (e.g.
        # "--parts truth --jobs smem-square,transpose-1k" or "--parts calibrate --pairs 100 --calibrate-seconds 240").
        truth) timeout -s KILL "$limit" python3 scripts/bench_truth.py --out "$OUT/truth-docs" \
                   ${TRUTH_ARGS:---jobs smem-square,smem-rect,reduce-64k,transpose-256,transpose-1k,gemv-1k,search-binary-4k --calibrate-seconds 150 --heat-seconds 30} ;;
        *) echo "unknown stage $stage"; false ;;
    esac > "$OUT/$stage.log" 2>&1
    rc=$?
    summary+=("$(printf '%-10s rc=%-3s %5ss  %s' "$stage" "$rc" "$(( $(date +%s) - t0 ))" "$(tail -n 1 "$OUT/$stage.log" | cut -c1-90)")")
done
echo "=== gpu-check summary"
printf '%s\n' "${summary[@]}"
