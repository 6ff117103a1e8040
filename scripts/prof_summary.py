"""Where a command's time went: the cProfile files ``CUDALAB_PROFILE=DIR`` left (the parent's and each GPU
worker's), summed by kind and printed as the functions with the most cumulative and own time.

    mkdir /tmp/prof && CUDALAB_PROFILE=/tmp/prof cudalab tune ... && python scripts/prof_summary.py /tmp/prof
"""

from __future__ import annotations

import argparse
import io
import pstats
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    for kind in ("parent", "worker"):
        files = sorted(Path(args.folder).glob(f"{kind}-*.prof"))
        if not files:
            print(f"== {kind}: no profile")
            continue
        stats = pstats.Stats(str(files[0]), stream=io.StringIO())
        for f in files[1:]:
            stats.add(str(f))
        for order in ("cumulative", "tottime"):
            out = io.StringIO()
            stats.stream = out
            stats.sort_stats(order).print_stats(args.top)
            text = out.getvalue()
            body = text[text.find("   ncalls"):] if "   ncalls" in text else text
            print(f"== {kind} ({len(files)} file(s)), by {order}")
            print("\n".join(line[:180] for line in body.splitlines()))


if __name__ == "__main__":
    main()
