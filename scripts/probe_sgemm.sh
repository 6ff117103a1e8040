#!/usr/bin/env bash
# Where fp32 matmul's last percent against cuBLAS SGEMM goes (issue 32): the same run's figures at the
# GPU's own clocks with sustained power (--energy), at a locked SM clock (per-cycle efficiency alone),
# and ncu's instruction mix, issue and stall sections for our best kernel and cuBLAS's at 4096^3.
#
#   OUT=/tmp/out bash scripts/probe_sgemm.sh [VARIANT]   (default: streamk; SERP=0 for streamk's row order)
set -u
OUT=${OUT:-/tmp/cudalab-out}
mkdir -p "$OUT"
best=${1:-streamk}
run() { timeout -s KILL 240 env COLUMNS=200 python3 -m cudalab "$@"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/smi.txt"
for n in 4096 8192; do
    run matmul --variant "$best,cublas" --n $n --energy --json "$OUT/energy-$n.json" > "$OUT/energy-$n.txt" 2>&1
    run matmul --variant "$best,cublas" --n $n --lock-clocks "${LOCK_MHZ:-1500}" --json "$OUT/lock-$n.json" > "$OUT/lock-$n.txt" 2>&1
done
# The stall reasons per issued instruction (the README's figures), with the sections around them.
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,sm__inst_issued.avg.pct_of_peak_sustained_active'
for v in "$best" cublas; do
    timeout -s KILL 240 ncu --target-processes all -k 'regex:streamk|warptile|gemm' --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats \
        --section Occupancy --section SchedulerStats --section WarpStateStats --metrics "$stalls" \
        python3 -m cudalab matmul --variant "$v" --n 4096 --budget 0.05 ${SERP:+-D SK_SERP=$SERP} > "$OUT/ncu-$v.txt" 2>&1
done
tar czf "$OUT/probe.tgz" -C "$OUT" $(cd "$OUT" && ls *.txt *.json 2>/dev/null)  # more than the 8 files a device call returns
for f in "$OUT"/energy-*.txt "$OUT"/lock-*.txt; do echo "== $f"; grep -E "streamk|warptile|cublas|GPU 0|clock" "$f" | head -8; done
for f in "$OUT"/ncu-*.txt; do echo "== $f"; grep -E "stalled_(dispatch|short_scoreboard|long_scoreboard|wait)|inst_issued" "$f"; done
