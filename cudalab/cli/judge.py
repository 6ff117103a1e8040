"""``cudalab judge``: one candidate kernel, one JSON object on stdout, an exit code a loop can act on."""

from __future__ import annotations

import json
import sys
import time

import click

from cudalab.cli.app import CONTEXT, cli


def _option(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for text in values:
        name, eq, value = text.partition("=")
        if not eq or not name.strip():
            raise click.BadParameter(f"{text!r} must be NAME=VALUE (a family option, e.g. tile=32)")
        out[name.strip()] = value.strip()
    return out


@cli.command("judge", context_settings=CONTEXT)
@click.argument("family")
@click.option("--add", "add", required=True, metavar="FILE.cu:KERNEL[@KEY=VALUE,...]",
              help="The candidate kernel, as --add on the family commands (cudalab list FAMILY: its signature).")
@click.option("--n", default=None, help="Problem size (one value).")
@click.option("--shape", default=None, help="Problem shape, e.g. 4096x2048 (one value).")
@click.option("--dtype", default=None, help="Element type (one value).")
@click.option("--seed", type=int, default=None, help="The inputs' seed [default: 1, so a loop's calls share inputs].")
@click.option("--budget", type=float, default=0.1, show_default=True, help="Seconds of samples per row, at most.")
@click.option("--min-samples", type=int, default=10, show_default=True, help="Samples per row, at least.")
@click.option("--against", default=None, metavar="VARIANT",
              help="The variant to beat ('none': no such row) [default: the family's best].")
@click.option("--reference", default=None, metavar="VARIANT",
              help="The reference row ('none': no such row) [default: the family's library or driver row].")
@click.option("--option", "options", multiple=True, callback=_option, metavar="NAME=VALUE",
              help="A family option (one value), repeatable.")
@click.option("--hot", is_flag=True, help="Do not flush the L2 before each sample.")
@click.option("--launch", default="auto", show_default=True, help="How a kernel under 20 µs is timed (as the family commands).")
@click.option("--timeout", type=float, default=None, help="Seconds a kernel may run before it is killed.")
@click.option("--device", type=int, default=0, show_default=True, help="GPU index.")
@click.option("--progress", is_flag=True, help="Progress on stderr.")
@click.option("--indent", type=int, default=None, help="Indent the JSON (default: one line).")
def judge_cmd(family: str, add: str, n: str | None, shape: str | None, dtype: str | None, seed: int | None,
              budget: float, min_samples: int, against: str | None, reference: str | None, options: dict[str, str],
              hot: bool, launch: str, timeout: float | None, device: int, progress: bool, indent: int | None) -> int:
    """Judge one kernel: run it beside the family's reference and best variant, print one JSON object.

    Correct or not (the first wrong element), its time and interval, speedups with compare's verdicts, % of
    the roofline, the flags of every door it tried (wrong_answer, memo, suspect, child_grids, side_stream,
    busy_after_stop), the GPU and the code that ran. Nothing else goes to stdout. Schema:
    docs/judge-schema.json; docs/judge.md.

    \b
    Exit codes: 0 correct and timed, no flag; 1 incorrect (also on the second input set); 3 failed or
    crashed (compile error, a CUDA error, a rule it cannot meet); 4 timed out; 5 correct but flagged
    (suspect); 2 refused input (one line on stderr, no JSON).

    \b
    Examples:
      cudalab judge reduce --n 2^24 --add mine.cu:my_reduce@block=512,per_thread=8
      cudalab judge copy --n 4096 --add my_copy.cu:my_copy@block=256
    """
    from cudalab.judging import Judge  # noqa: PLC0415

    t0 = time.perf_counter()
    with Judge(device, timeout, progress) as j:
        obj = j.judge(family, add, n=n, shape=shape, dtype=dtype, seed=seed, budget=budget, min_samples=min_samples,
                      against=against, reference=reference, hot=hot, launch=launch, **options)
        t_close = time.perf_counter()
    sys.stdout.write(json.dumps(obj, indent=indent, allow_nan=False, default=str) + "\n")
    sys.stdout.flush()
    print(f"cudalab judge: {obj['candidate']} {obj['verdict']}"
          + (f" (flags: {', '.join(obj['flags'])})" if obj["flags"] else "") + f", exit {obj['exit_code']} "
          + _phases(j.phases, time.perf_counter() - t0, time.perf_counter() - t_close), file=sys.stderr)
    return int(obj["exit_code"])


def _phases(p: dict, total: float, close: float) -> str:
    """Where the command's time went, after the imports (scripts/judge_check.py reads it)."""
    if not p:
        return ""
    kept = f"; rivals and roofline kept from {p['kept_s']:.0f} s before" if p.get("kept_s") is not None else ""
    return (f"[{total:.2f} s in the command: plan {p['plan_s']:.2f}, GPU open {p['gpu_open_s']:.2f}, "
            f"{p['rows']} row(s){' + roofline' if p['roofline'] else ''} {p['rows_s']:.2f}, verdict "
            f"{p['verdict_s']:.2f}, close {close:.2f}{kept}]")
