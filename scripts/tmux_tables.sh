#!/bin/bash
# Render saved runs in a real terminal (tmux) at 80, 120 and 200 columns and keep what it shows:
# docs/terminal/<name>-<cols>.txt. Checks that tables fit the terminal without splitting numbers.
#   bash scripts/tmux_tables.sh
set -euo pipefail
cd "$(dirname "$0")/.."
R=tests/data/runs
out=docs/terminal
mkdir -p "$out"
declare -A cmds=(
  [report-transpose]="cudalab report $R/nvidia-h200-transpose.json"
  [report-reduce]="cudalab report $R/nvidia-h100-80gb-hbm3-reduce.json"
  [compare-h100-h200]="cudalab compare $R/nvidia-h100-80gb-hbm3-transpose.json $R/nvidia-h200-transpose.json"
  [compile-transpose]="cudalab compile transpose"
  [list-reduce]="cudalab list reduce"
)
for name in "${!cmds[@]}"; do
  for cols in 80 120 200; do
    session="cudalab-$name-$cols"
    tmux kill-session -t "$session" 2>/dev/null || true
    tmux new-session -d -s "$session" -x "$cols" -y 100 "bash --norc --noprofile"
    tmux send-keys -t "$session" "clear; COLUMNS= ${cmds[$name]}; echo '(exit '\$?')'" Enter
    sleep 4
    { echo "\$ ${cmds[$name]}    # tmux, $cols columns"; tmux capture-pane -p -J -S -200 -t "$session" | sed -e '/^$/N;/^\n$/D' | sed '1{/^$/d}' | sed '/^bash-[0-9.]*[#$] *$/d'; } > "$out/$name-$cols.txt"
    tmux kill-session -t "$session"
  done
done
ls "$out"
# Every line the terminal showed fits its width (the first line of a capture is the command itself).
python3 - <<'PY'
import glob, sys
bad = []
for f in sorted(glob.glob("docs/terminal/*.txt")):
    cols = int(f.rsplit("-", 1)[1].split(".")[0])
    bad += [f"{f}: {len(l)} > {cols}" for l in open(f, encoding="utf-8").read().splitlines()[1:] if len(l) > cols]
print("\n".join(bad) or "every line fits its terminal")
sys.exit(1 if bad else 0)
PY
