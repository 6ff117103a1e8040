#!/usr/bin/env bash
# The README's --add examples, run for real (stdout and stderr of each into $OUT/examples.txt).
set -u
OUT=${OUT:-/tmp/cudalab-out}
T=docs/examples
keys=block=32x8,tile=32x32
run() { echo "\$ cudalab $*"; timeout 90 python3 -m cudalab "$@" 2>&1; echo "(exit $?)"; echo; }
{
run transpose --n 4096 --variant tiled-32x8 --add $T/my_transpose.cu:my_transpose@$keys \
    --add $T/my_transpose_edge.cu:my_transpose_edge@$keys --add $T/my_transpose_nosync.cu:my_transpose_nosync@$keys
run reduce --n 2^24 --variant modern,cub --add $T/my_reduce.cu:my_reduce@block=512,per_thread=2 \
    --add $T/my_reduce_edge.cu:my_reduce_edge@block=512,per_thread=2 --add $T/my_reduce_nosync.cu:my_reduce_nosync@block=512,per_thread=2
run transpose --n 1k,4k --block 32x8,16x16 --variant tiled-32x8 --no-roofline --layout long
run ncu transpose --n 4096 --variant bankopt --add $T/my_transpose.cu:my_transpose@$keys
run sanitize transpose --variant naive --tool memcheck,racecheck --add $T/my_transpose.cu:my_transpose@$keys
} > "$OUT/examples.txt"
tail -n 5 "$OUT/examples.txt"
