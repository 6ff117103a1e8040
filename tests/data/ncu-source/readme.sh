#!/bin/bash
# The README's "Where in my kernel" output, live on a GPU with ncu: bash tests/data/ncu-source/readme.sh OUTDIR
W=${1:?outdir}; mkdir -p "$W"
export COLUMNS=150
run() {  # NAME ARGS...
  local name=$1; shift
  { echo "\$ cudalab $*"; timeout -s KILL 120 cudalab "$@" 2>&1; echo "(exit $?)"; } > "$W/$name.txt"
}
run square ncu smem-square --variant row-row,col-col,row-col,row-col-pad --source --lines 3
run rect ncu smem-rect --variant row-col,row-col-pad --source --lines 2 --no-advice
run transpose ncu transpose --n 4096 --variant block,bankopt --add docs/examples/my_transpose.cu:my_transpose@block=32x8,tile=32x32 --source --lines 4 --export "$W/transpose-live.csv" --json "$W/transpose-live.json"
run reduce ncu reduce --variant neighbored,interleaved --n 16777216 --source --lines 4
run report report "$W/transpose-live.json"
