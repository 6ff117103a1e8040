#!/usr/bin/env bash
# One call on the GPU machine: install cudalab and pycuda (wheels in .wheelhouse), run the GPU tests
# and the benchmarks, keep logs and JSON under $OUT, print a short table last.
#
#   bash scripts/gpu-check.sh [STAGE...]   stages: info tests ncu sanitizer bench hostile largest roofline
#                                          examples newuser badgpu printf tune roofline truth
#                                          cluster occ bench-lanes tunedemo ab tuneown judge ctrlc rowmix charts
#                                          campaign
#                                          (default: info tests ncu sanitizer bench)
#
# The records name the code that ran (cudalab.records.machine.code_revision): the GPU machine's git HEAD is the
# session's first commit, so start the call with CUDALAB_CODE=<the local `git rev-parse --short HEAD`> (else
# they say HEAD+dirty).
#
# Each stage's log goes to $OUT/<stage>.log; the benchmark record to $OUT/bench/. A stage is stopped
# after $STAGE_TIMEOUT seconds (default 480) so one hang cannot eat the whole lease. Extra pytest
# arguments for the test stages: $PYTEST_ARGS (e.g. "-x -k transpose").
#
# Lanes, on a machine with several GPUs: stage groups separated by "/" run at the same time, group N on
# GPU N (CUDA_VISIBLE_DEVICES=N for its processes, CUDA_DEVICE_ORDER=PCI_BUS_ID so that N is also
# nvidia-smi's N), each group's stages one after another; the install runs once before the lanes; one
# summary at the end names each stage's GPU. $OUT/lane<N>.log says which GPU lane N got. A lane whose GPU
# is not there is not run (one line; its stages "not run" in the summary). A stage appears in one lane
# only (its log is $OUT/<stage>.log), except tune and truth, which may run in several lanes (more campaigns or
# calibrations at once): then each lane's log is $OUT/<stage>-gpu<N>.log, its record goes to
# $OUT/tune-docs-gpu<N>/ (only that lane's parts: join them with bench_tune.py --merge) or $OUT/truth-docs-gpu<N>/,
# and $TUNE_ARGS_GPU<N> / $TRUTH_ARGS_GPU<N>, when set, replace $TUNE_ARGS / $TRUTH_ARGS in lane N. Cluster and
# bench-lanes use every GPU themselves: not in lanes.
# On two GPUs the GPU tests (about 240 s, then ncu 116 s and sanitizer 203 s in sequence on an H200):
#
#   bash scripts/gpu-check.sh info tests / ncu sanitizer    # longer lane ~320 s (estimated from the above)
#
# (tests/test_isolation_gpu.py asks NVML about the GPU CUDA_VISIBLE_DEVICES names, so tests may run in any lane.)
#
# bench-lanes: the benchmark record from two GPUs at once (scripts/benchmark.py, "One record from two
# GPUs at once"): each group of $BENCH_LANES (benchmark.py arguments, groups separated by "/"; default
# below) runs on its own GPU with --deadline $STAGE_TIMEOUT - 30 into $OUT/bench-gpu<N>/ (log
# $OUT/bench-lanes-gpu<N>.log), then `benchmark.py --sections none --merge ... ` writes the one record
# to $OUT/bench/ ($BENCH_ARGS go to every lane). The whole record (about 17 minutes on one GPU) in one
# call of 10 minutes once installed (a section that would pass the deadline is "not run" in the record,
# with the call that adds it):
#
#   STAGE_TIMEOUT=540 bash scripts/gpu-check.sh bench-lanes
set -u -o pipefail
OUT=${OUT:-/tmp/cudalab-out}
mkdir -p "$OUT"
stages=${*:-"info tests ncu sanitizer bench"}
limit=${STAGE_TIMEOUT:-480}
# bench-lanes: lane 0 the jobs and the large sizes; lane 1 the other sections and the jobs they read
BENCH_LANES_DEFAULT="--sections jobs,large / --only copy,transpose,reduce --sections jobs,wall,saved,ncu,energy,truth,table36,ceiling"

gpu_count() {  # the GPUs of this machine as nvidia-smi lists them (0 without nvidia-smi)
    nvidia-smi -L 2>/dev/null | grep -c '^GPU '
}

# Lanes: the stage groups, checked before anything is installed or run
lanes=()
repeated=" "   # stages in more than one lane (tune, truth): a log and a record folder per lane
if [[ $stages == */* ]]; then
    IFS=/ read -r -a lanes <<< "$stages"
    seen=" "
    for group in "${lanes[@]}"; do
        for stage in $group; do
            case $stage in cluster|bench-lanes)
                echo "gpu-check: $stage uses every GPU itself: run it without lanes (no /)"; exit 2 ;; esac
            if [[ $seen == *" $stage "* ]]; then
                case $stage in tune|truth) repeated+="$stage " ;;
                    *) echo "gpu-check: $stage in two lanes (one log each: \$OUT/$stage.log)"; exit 2 ;; esac
            fi
            seen+="$stage "
        done
    done
fi

if ! python3 -c "import pycuda, cudalab" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl || exit 2
    python3 -m pip install -q --no-index --no-build-isolation -e '.[gpu,test]' || exit 2
fi
export PYTHONUNBUFFERED=1 LC_ALL=C

bench_lanes() {  # each group of $BENCH_LANES on its own GPU at the same time, then their records merged
    local groups args i r rc=0 pids=() merge=()
    IFS=/ read -r -a groups <<< "${BENCH_LANES:-$BENCH_LANES_DEFAULT}"
    if [ "$(gpu_count)" -lt ${#groups[@]} ]; then
        echo "bench-lanes: ${#groups[@]} lanes need ${#groups[@]} GPUs, nvidia-smi lists $(gpu_count): not run"
        return 2
    fi
    for i in "${!groups[@]}"; do
        rm -rf "$OUT/bench-gpu$i"   # a record left by an earlier call must not be merged
        read -r -a args <<< "${groups[$i]} ${BENCH_ARGS:-}"   # benchmark.py's arguments, split at spaces
        echo "=== GPU $i: python3 scripts/benchmark.py ${args[*]} (log bench-lanes-gpu$i.log, record bench-gpu$i/)"
        CUDA_VISIBLE_DEVICES=$i CUDA_DEVICE_ORDER=PCI_BUS_ID timeout -s KILL "$limit" python3 scripts/benchmark.py \
            --out "$OUT/bench-gpu$i" --deadline $((limit - 30)) "${args[@]}" > "$OUT/bench-lanes-gpu$i.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"; r=$?
        echo "GPU $i: exit $r: $(tail -n 1 "$OUT/bench-lanes-gpu$i.log" | cut -c1-120)"
        [ "$r" -ne 0 ] && rc=$r
        if ls "$OUT/bench-gpu$i"/*.json > /dev/null 2>&1; then
            merge+=(--merge "$OUT/bench-gpu$i")
        else
            echo "GPU $i wrote no record: the merge goes without it"; rc=1
        fi
    done
    [ ${#merge[@]} -gt 0 ] || return 1
    timeout -s KILL 120 python3 scripts/benchmark.py --sections none "${merge[@]}" --out "$OUT/bench" || return $?
    return $rc
}

lane_args() {  # the arguments in $1 (a variable's name): ${1}_GPU<lane> when set, else $1 when set, else $2
    local mine="${1}_GPU${LANE:-}"
    if [ -n "${LANE:-}" ] && [ -n "${!mine+x}" ]; then echo "${!mine}"
    elif [ -n "${!1+x}" ]; then echo "${!1}"
    else echo "${2:-}"; fi
}

SFX=""   # a repeated stage's lane: -gpu<N> on its log and record folder
stage_cmd() {  # the commands of stage $1 (run_stage sends their output to its log)
    local stage=$1
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
        roofline) ( # issue 59: ceilings measured and cached, checked against the library's GEMM; the two charts
                    timeout -s KILL 120 python3 -m pytest -q -p no:cacheprovider -rs -s tests/test_ceilings_gpu.py
                    timeout -s KILL 120 python3 -m cudalab roofline --measure
                    mkdir -p "$OUT/plots"
                    COLUMNS=200 timeout -s KILL 90 python3 -m cudalab transpose --n 16384 --json "$OUT/plots/nvidia-h200-transpose-16384.json"
                    COLUMNS=200 timeout -s KILL 150 python3 -m cudalab matmul --n 4096 --ncu --json "$OUT/plots/nvidia-h200-matmul-4096-ncu.json"
                    python3 -m cudalab roofline "$OUT/plots/nvidia-h200-transpose-16384.json" -o "$OUT/plots/nvidia-h200-transpose-roofline.svg"
                    python3 -m cudalab roofline "$OUT/plots/nvidia-h200-matmul-4096-ncu.json" -o "$OUT/plots/nvidia-h200-matmul-roofline.svg"
                    python3 -m cudalab roofline "$OUT/plots/nvidia-h200-matmul-4096-ncu.json" -o "$OUT/plots/nvidia-h200-matmul-roofline.html"
                    timeout -s KILL 60 python3 scripts/check_ceilings.py ) ;;   # last: its verdict is the summary's line
        rowmix) ( # issue 59: no row over 100% of its own roofline (read/write streams beside the copy); ‡ marks one
                  for cmd in "copy --n 8192" "transpose --n 8192" "reduce" "gemv" "--family-path examples rowsum" \
                             "--family-path examples histogram" "--family-path examples softmax" \
                             "--family-path examples scan"; do
                      echo "=== cudalab $cmd"
                      COLUMNS=200 timeout -s KILL 60 python3 -m cudalab $cmd | tee -a "$OUT/rowmix-tables.txt"
                  done
                  echo "rows flagged above their roofline (‡): $(grep -c '‡ [0-9]' "$OUT/rowmix-tables.txt")" ) ;;
        # issue 59: the two H200 charts from the committed runs (docs/plots/runs/) into $OUT/plots/; the first chart
        # measures the ceilings this GPU's cache lacks (about a minute, a line says so), the second reads the cache
        charts) ( mkdir -p "$OUT/plots"
                  for run in matmul-4096-ncu transpose-16384; do
                      timeout -s KILL 150 python3 -m cudalab roofline "docs/plots/runs/nvidia-h200-$run.json" \
                          -o "$OUT/plots/nvidia-h200-${run%%-[0-9]*}-roofline.svg" || exit $?
                  done ) ;;
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
        # issue 43: cudalab tune's ground truth, replay, trust and kernel_tuner (scripts/bench_tune.py), added to
        # the checkout's docs/benchmarks record of this GPU (a space or part measured in an earlier call keeps its
        # figures), then copied to $OUT/tune-docs (copy them back to docs/benchmarks/). Sized by $TUNE_ARGS
        # (e.g. "--spaces reduce-modern --trials 120 --repeats 3 --seconds 0.05"); kernel_tuner from
        # $KERNEL_TUNER (a folder it imports from), else that part is skipped, saying so.
        tune) python3 -c 'import optuna' 2>/dev/null || python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl
              # kernel_tuner 1.5 and what it needs beyond the machine's packages, as wheels in .wheelhouse/kt/
              if [ -z "${KERNEL_TUNER:-}" ] && ls .wheelhouse/kt/*.whl >/dev/null 2>&1; then
                  python3 -m pip install -q --no-index --no-deps --target /tmp/kt .wheelhouse/kt/*.whl && KERNEL_TUNER=/tmp/kt
              fi
              if [ -n "$SFX" ]; then   # one of several lanes: this lane's parts alone, for --merge
                  timeout -s KILL "$limit" python3 scripts/bench_tune.py --out "$OUT/tune-docs$SFX" \
                      ${KERNEL_TUNER:+--kernel-tuner "$KERNEL_TUNER"} $(lane_args TUNE_ARGS)
              else
                  timeout -s KILL "$limit" python3 scripts/bench_tune.py --out docs/benchmarks \
                      ${KERNEL_TUNER:+--kernel-tuner "$KERNEL_TUNER"} $(lane_args TUNE_ARGS)
                  rc=$?; mkdir -p "$OUT/tune-docs"; cp -r docs/benchmarks/*-tune.* docs/benchmarks/tune "$OUT/tune-docs/"
                  (exit $rc)
              fi ;;
        # issue 56: your own kernel tuned, cudalab against kernel_tuner on two user-style spaces (scripts/bench_tune_own.py):
        # the record, its campaigns and kernel_tuner's caches under $OUT/tuneown-docs (copy them to docs/benchmarks/).
        # Arguments: $TUNEOWN_ARGS (e.g. "--spaces axpy --repeats 2"); kernel_tuner from .wheelhouse/kt/ as in tune.
        tuneown) python3 -c 'import optuna' 2>/dev/null || python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl
                 kt=""
                 if ls .wheelhouse/kt/*.whl >/dev/null 2>&1; then
                     python3 -m pip install -q --no-index --no-deps --target /tmp/kt .wheelhouse/kt/*.whl && kt=/tmp/kt
                 fi
                 timeout -s KILL "$limit" python3 scripts/bench_tune_own.py ${kt:+--kernel-tuner "$kt"} \
                     --out "$OUT/tuneown-docs$SFX" $(lane_args TUNEOWN_ARGS) ;;
        # issue 43: the README's run, a real campaign of the matmul warptile with its table and plot
        # issue 57: Ctrl-C to the process group during a real campaign's trials and mid-race, then resumed;
        # VERDICT lines say whether an interrupted campaign named a winner and whether its counts add up
        ctrlc) python3 -c 'import optuna' 2>/dev/null || python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl
               timeout -s KILL "$limit" python3 scripts/ctrl_c_campaign.py --out "$OUT/ctrlc" ${CTRLC_ARGS:-} ;;
        tunedemo) python3 -c 'import optuna' 2>/dev/null || python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl
                  rm -f /tmp/demo.tune.db
                  timeout -s KILL "$limit" env COLUMNS=120 python3 -m cudalab tune matmul --variant warptile \
                      --trials "${DEMO_TRIALS:-40}" --seed 1 --storage sqlite:////tmp/demo.tune.db \
                      --json "$OUT/tune-matmul.json" --plot "$OUT/tune-matmul.png" ;;
        # issue 58: the 30-trial matmul warptile campaign cold, on this host's engine and with --cluster local, each from
        # its own empty build cache, its own wall against max(builds / cores, GPU work) + 20% (PASS/FAIL lines); the record
        # <gpu>-campaign.md/.json under $OUT/campaign-docs (copy it to docs/benchmarks/). About 2-3 minutes.
        # With it <gpu>-campaign-timeline.txt: where the local cold campaign's GPU waited, and for which build (--timeline).
        # CAMPAIGN_ARGS="--profile $OUT/campaign-docs": also profiles.txt, each campaign's processes' top functions (cProfile).
        campaign) python3 -c 'import optuna, distributed' 2>/dev/null || python3 -m pip install -q --no-index --no-deps .wheelhouse/*.whl
                  timeout -s KILL "$limit" python3 scripts/bench_campaign_cold.py --out "$OUT/campaign-docs" --timeline \
                      ${CAMPAIGN_ARGS:-} ;;
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
        # issues 46, 59: cudalab truth of short built-in kernels (the smem families, a 512² copy, small transposes
        # and reductions: 24 rows) against CUPTI's spans, cold and hot, twice: as installed (cupti-python from
        # .wheelhouse/cupti/ when it is not importable) and with CUDALAB_NO_CUPTI=1 (the graph fallback); ncu's
        # offset from CUPTI. Default: the truth part only (~3-4 min on an H200, no job started past 200 s), the
        # calibrate and throttle parts kept from the committed H200 record (--merge: the GPU must be an H200).
        # The record goes to $OUT/truth-docs (copy it to docs/benchmarks/). Look for the last line "truth: ...
        # claim ...: PASS". Other parts and sizes: $TRUTH_ARGS (e.g. "--parts calibrate --pairs 100").
        truth) { python3 -c "import cupti" 2>/dev/null || ! ls .wheelhouse/cupti/*.whl >/dev/null 2>&1 ||
                 python3 -m pip install -q --no-index --find-links .wheelhouse/cupti cupti-python ||
                 echo "truth: cupti-python did not install from .wheelhouse/cupti: no CUPTI reference"; }
               python3 -c "from cupti import cupti; print('truth: cupti-python loads')" 2>&1 | tail -1
               timeout -s KILL "$limit" python3 scripts/bench_truth.py --out "$OUT/truth-docs$SFX" \
                   $(lane_args TRUTH_ARGS "--parts truth --truth-deadline 200 --merge docs/benchmarks/nvidia-h200-truth.json") ;;
        # issue 42 item 8: the same benchmark jobs from an older tree ($AB_OLD, default .ab-old: `git archive REV |
        # tar -x -C .ab-old; echo REV > .ab-old/REVISION`, ignored and carried) and from this one, alternately on this lane's GPU for $AB_ROUNDS
        # rounds (old, new, old, new...: the GPU's drift falls on both), then scripts/bench_agree.py judges them
        # (records and agree.md under $OUT/ab/). benchmark.py's arguments: $AB_ARGS (default the jobs of the
        # short-kernel families; AB_ARGS="--sections wall": time to table, the older tree's commands against these).
        ab) ( old=${AB_OLD:-.ab-old}
              [ -f "$old/scripts/benchmark.py" ] || { echo "ab: no older tree at $old (git archive REV | tar -x -C $old)"; exit 2; }
              mkdir -p "$OUT/ab"
              for i in $(seq "${AB_ROUNDS:-2}"); do
                  for side in old new; do
                      dir=.; [ $side = old ] && dir=$old
                      # the old side's records name its own revision (CUDALAB_CODE, exported for the call, names the new)
                      code=${CUDALAB_CODE:-}; [ $side = old ] && code=$(cat "$old/REVISION" 2>/dev/null || echo old)
                      # the tree's own cudalab (PYTHONPATH goes before the editable install; its workers inherit it)
                      ( cd "$dir" && export PYTHONPATH=$PWD CUDALAB_CODE=$code && python3 -c 'import cudalab; print("cudalab from", cudalab.__file__)' &&
                        timeout -s KILL 300 python3 scripts/benchmark.py --out "$OUT/ab/$side-$i" \
                            ${AB_ARGS:---sections jobs --only reduce,smem-square,smem-rect,copy,transpose} > "$OUT/ab/$side-$i.log" 2>&1
                        echo "$side round $i: exit $?" )
                  done
              done
              python3 scripts/bench_agree.py "$OUT"/ab/old-*/ --vs "$OUT"/ab/new-*/ --out "$OUT/ab" \
                  --names "$(cat "$old/REVISION" 2>/dev/null || echo "$old")" "${CUDALAB_CODE:-this tree}" ) ;;
        # issue 60: the exploit suite's GPU test (every exploit caught with its flag, every honest twin correct and
        # unflagged), then scripts/judge_check.py: cudalab judge on built-in families and an own problem (each JSON
        # validated against docs/judge-schema.json), the suite again for the record, 100 cudalab.judge calls in one
        # process and 10 commands timed. The record <gpu>-judge.md/.json goes to $OUT/judge-docs (copy it to
        # docs/benchmarks/), every JSON object the judge gave to $OUT/judge-objects. ~3-4 min on an H200.
        # $JUDGE_ARGS go to judge_check.py (e.g. "--parts commands,timing --calls 50").
        judge) timeout -s KILL 150 python3 -m pytest -q -p no:cacheprovider -rs tests/test_exploits_gpu.py
               rc=$?
               timeout -s KILL 240 python3 scripts/judge_check.py --out "$OUT/judge-docs" --objects "$OUT/judge-objects" \
                   ${JUDGE_ARGS:-} || rc=$?
               (exit $rc) ;;
        bench-lanes) bench_lanes ;;
        *) echo "unknown stage $stage"; false ;;
    esac
}

summary=()
run_stage() {  # stage $1 into $OUT/$1.log, its line added to the summary ($2: its lane's GPU, in lanes)
    local t0 rc
    t0=$(date +%s)
    SFX=""; [[ $repeated == *" $1 "* ]] && SFX="-gpu$2"
    stage_cmd "$1" > "$OUT/$1$SFX.log" 2>&1
    rc=$?
    summary+=("$(printf '%-10s rc=%-3s %5ss  %s%s' "$1" "$rc" "$(( $(date +%s) - t0 ))" "${2:+GPU $2  }" \
                 "$(tail -n 1 "$OUT/$1$SFX.log" | cut -c1-90)")")
}

run_lane() {  # lane $1: its stages one after another on GPU $1; its summary lines into $lanedir/$1
    local lane=$1 cuda smi same
    shift
    export CUDA_VISIBLE_DEVICES=$lane CUDA_DEVICE_ORDER=PCI_BUS_ID LANE=$lane
    # Which GPU this lane got: CUDA's device 0 here (cudalab finds its telemetry in NVML by this bus id, never by
    # index) against nvidia-smi's GPU $lane; bus ids compared on their last 12 characters (CUDA writes a 4-digit
    # PCI domain, nvidia-smi an 8-digit one)
    cuda=$(python3 -m cudalab.worker.busid 0 2>&1)
    smi=$(nvidia-smi -i "$lane" --query-gpu=pci.bus_id --format=csv,noheader 2>&1)
    same="NOT the GPU nvidia-smi numbers $lane"
    cuda=${cuda,,} smi=${smi,,}
    [ ${#cuda} -ge 12 ] && [ "${cuda: -12}" = "${smi: -12}" ] && same="the GPU nvidia-smi numbers $lane"
    printf 'lane %s (stages: %s): CUDA_VISIBLE_DEVICES=%s, CUDA device 0 is %s: %s (bus %s)\n' \
        "$lane" "$*" "$lane" "$cuda" "$same" "$smi" > "$OUT/lane$lane.log"
    summary=()
    for stage; do run_stage "$stage" "$lane"; done
    printf '%s\n' "${summary[@]}" > "$lanedir/$lane"
}

if [ ${#lanes[@]} -eq 0 ]; then
    for stage in $stages; do run_stage "$stage"; done
else
    lanedir=$(mktemp -d)
    gpus=$(gpu_count)
    pids=()
    for i in "${!lanes[@]}"; do
        read -r -a group <<< "${lanes[$i]}"
        [ ${#group[@]} -eq 0 ] && continue
        if [ "$i" -ge "$gpus" ]; then
            echo "gpu-check: lane $i wants GPU $i, nvidia-smi lists $gpus GPU(s): not running ${group[*]}"
            for stage in "${group[@]}"; do
                printf '%-10s rc=%-3s %5ss  GPU %s  %s\n' "$stage" - 0 "$i" "not run: no GPU $i on this machine"
            done > "$lanedir/$i"
            continue
        fi
        run_lane "$i" "${group[@]}" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    for i in "${!lanes[@]}"; do [ -f "$lanedir/$i" ] && summary+=("$(cat "$lanedir/$i")"); done
    rm -rf "$lanedir"
fi
echo "=== gpu-check summary"
printf '%s\n' "${summary[@]}"
