#!/bin/bash
# How the files in this folder were captured (one GPU call, H100, ncu of the CUDA toolkit there):
# the ladders profiled with `cudalab ncu FAMILY --source --export NAME.ncu-rep` (ncu --set full
# --import-source yes on the child, kernels built with -lineinfo), then each report printed back as
# the source page (CUDA lines alone, and CUDA with SASS) and the details page, as CSV.
# Usage: bash tests/data/ncu-source/capture.sh OUTDIR
W=${1:?outdir}; mkdir -p "$W"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$NCU" --version > "$W/ncu-version.txt" 2>&1
"$NCU" --help > "$W/ncu-help.txt" 2>&1
nvidia-smi -L >> "$W/ncu-version.txt" 2>&1
prof() {  # NAME FAMILY ARGS...
  local name=$1; shift
  ( time timeout -s KILL 120 cudalab ncu "$@" --source --export "$W/$name.ncu-rep" ) > "$W/$name.stdout.txt" 2>&1
  echo "exit $?" >> "$W/$name.stdout.txt"
  [ -f "$W/$name.ncu-rep" ] || return
  "$NCU" --import "$W/$name.ncu-rep" --page source --print-source cuda --csv > "$W/$name.source-cuda.csv" 2> "$W/$name.err.txt"
  "$NCU" --import "$W/$name.ncu-rep" --page source --print-source cuda,sass --csv > "$W/$name.source-cuda-sass.csv" 2>> "$W/$name.err.txt"
  "$NCU" --import "$W/$name.ncu-rep" --page details --csv --print-units base > "$W/$name.details.csv" 2>> "$W/$name.err.txt"
  "$NCU" --import "$W/$name.ncu-rep" --page details --csv --print-units base --print-details all --print-rule-details > "$W/$name.details-all.csv" 2>> "$W/$name.err.txt"
}
prof smem-square smem-square
prof transpose transpose --n 4096 --variant block,bankopt --add docs/examples/my_transpose.cu:my_transpose@block=32x8,tile=32x32
prof reduce reduce --variant neighbored,interleaved --n 16777216
