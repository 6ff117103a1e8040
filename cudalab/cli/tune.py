"""``cudalab tune``: search a kernel variant's parameters (the work is in :mod:`cudalab.tuning`)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import click

from cudalab.cli.app import CONTEXT, cli, echo_folded
from cudalab.errors import UsageError


def _family_options(args: list[str], family: str, ctx: click.Context) -> tuple[tuple[str, str], ...]:
    """The family options given as dimensions after the known options (``--tile 8,16,32``).

    Only a family's declared option becomes a dimension; any other ``--NAME`` is a mistyped option, refused
    with the nearest real one (``--trails`` -> ``--trials``): only ``-D`` makes a define.

    Raises:
        UsageError: an argument that is neither.
    """
    import difflib  # noqa: PLC0415

    if not args:
        return ()
    from cudalab import catalog  # noqa: PLC0415
    from cudalab.families import load  # noqa: PLC0415

    declared = {o.name.replace("_", "-") for o in load(catalog.family(family).module).OPTIONS}
    mine = {n[2:] for p in ctx.command.params for n in p.opts if n.startswith("--")}
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--") or len(a) < 3:
            raise UsageError(f"unexpected argument {a!r} (a family option is --NAME VALUES)")
        name, eq, value = a[2:].partition("=")
        if name.replace("_", "-") not in declared:
            near = difflib.get_close_matches(name, sorted(mine | declared), n=1, cutoff=0.5)
            hint = f" (did you mean --{near[0]}?)" if near else ""
            what = f"; {family}'s own: --{', --'.join(sorted(declared))}" if declared else ""
            raise UsageError(f"no such option: --{name}{hint}{what} (a define is -D NAME=VALUES)")
        if not eq:
            if i + 1 >= len(args):
                raise UsageError(f"{a} needs values (example: {a} 8,16,32)")
            value, i = args[i + 1], i + 1
        out.append((name.replace("_", "-"), value))
        i += 1
    return tuple(out)


@cli.command("tune", context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("family", required=False)
@click.option("--variant", default=None, help="The kernel variant to tune (default: the family's [[tune]] one).")
@click.option("--add", "add", default=None, metavar="FILE.cu:KERNEL[@KEY=VALUE,...]",
              help="Tune your own kernel on the family's problem instead of a variant; tile=, grid=, shared= may be "
                   "expressions over the tuned names (tile=block_x*TX x block_y*TY).")
@click.option("--n", default=None, help="Problem size (default: the [[tune]] table's, else the family's).")
@click.option("--shape", default=None, help="Problem shape.")
@click.option("--dtype", default=None, help="Element type.")
@click.option("-D", "--define", "defines", multiple=True, metavar="NAME=VALUES",
              help="A define dimension: 8,16,32, 2..6, 8..64:pow2 (repeatable).")
@click.option("--block", default=None, help="The block dimension: 128,256 or 64..1024:pow2.")
@click.option("--require", multiple=True, metavar="EXPR", help="A constraint over the names (repeatable).")
@click.option("--no-table", is_flag=True, help="Ignore the family's [[tune]] table: only the dimensions given.")
@click.option("--strategy", default=None, help="grid, random, tpe (default), cmaes, gp, nsga2 (two objectives); "
                                               "with --replay a comma list.")
@click.option("--trials", type=int, default=None, help="Configurations to measure in all (a resumed campaign counts "
                                                       "its earlier ones).")
@click.option("--time", "time_text", default=None, help="Stop after this long (90s, 10m, 1.5h).")
@click.option("--seed", type=int, default=None, help="Makes the strategy (and the inputs) repeatable.")
@click.option("--objective", default="time", show_default=True, help="time, energy or time,energy (Pareto front).")
@click.option("--name", default=None, help="The campaign's name (default: FAMILY-VARIANT).")
@click.option("--storage", default=None, help="An SQLAlchemy URL (default: sqlite:///NAME.tune.db here).")
@click.option("--race", "race_k", type=int, default=5, show_default=True, help="Race the best K (0: no race).")
@click.option("--tolerance", type=float, default=None,
              help="A tie: within this fraction (0.01: 1%) [default: the GPU's calibrated noise floor "
                   "(cudalab calibrate), else 0.01].")
@click.option("--budget", default=0.1, show_default=True, help="Timing seconds a trial.")
@click.option("--device", type=int, default=0, show_default=True, help="GPU index.")
@click.option("--timeout", type=float, default=None, help="The watchdog's limit for one kernel, seconds.")
@click.option("--cluster", default=None, metavar="local|tcp://HOST:PORT",
              help="Run the trials on a Dask cluster, one worker per GPU: 'local' (this host's GPUs, see --devices) "
                   "or a scheduler's address (docs/cluster.md).")
@click.option("--devices", default=None, metavar="LIST", help="With --cluster local: the GPUs, 0,1 or all.")
@click.option("--build-ahead", type=int, default=None, help="nvcc threads building upcoming trials (default: cores - 1).")
@click.option("--json", "json_path", default=None, metavar="FILE", help="Save the run record (report, compare read it).")
@click.option("--plot", "plot_path", default=None, metavar="FILE", help="Convergence and importances to .png/.svg/.pdf.")
@click.option("--replay", default=None, metavar="CAMPAIGN",
              help="Replay strategies against a finished campaign (no GPU): a cudalab campaign file, or a kernel_tuner "
                   "cache file (.json).")
@click.option("--versus", default=None, metavar="KT_CACHE",
              help="With --replay CAMPAIGN: its measurements beside a kernel_tuner cache file's of the same space.")
@click.option("--header", "header_path", default=None, metavar="FILE.h",
              help="Write the winner as a C header of #defines (and FILE.h.json) naming the GPU.")
@click.option("--seeds", type=int, default=20, show_default=True, help="With --replay: seeds per strategy.")
@click.option("--quiet", is_flag=True, help="No live line.")
@click.pass_context
def tune_cmd(ctx: click.Context, family: str | None, variant: str | None, add: str | None, n: str | None, shape: str | None,
             dtype: str | None, defines: tuple[str, ...], block: str | None, require: tuple[str, ...], no_table: bool,
             strategy: str | None, trials: int | None, time_text: str | None, seed: int | None, objective: str,
             name: str | None, storage: str | None, race_k: int, tolerance: float, budget: float, device: int,
             timeout: float | None, cluster: str | None, devices: str | None, build_ahead: int | None, json_path: str | None, plot_path: str | None,
             replay: str | None, versus: str | None, header_path: str | None, seeds: int, quiet: bool) -> None:
    """Search a kernel variant's parameters with a real strategy and name a winner you can trust.

    Every trial is an ordinary run point (built, verified, timed in the GPU worker); the campaign is an
    Optuna study (SQLite by default), and the same command continues it. The first trial is the family's
    own configuration when it is in the space, so it can win: the table marks it "(default)".

    \b
    Examples:
      cudalab tune matmul --variant warptile --trials 60
      cudalab tune copy --variant vec4 -D UNROLL=1..8 --block 64..1024:pow2 --require 'threads*UNROLL <= 4096'
      cudalab tune matmul --n 2048 --add 'my_sgemm.cu:my_sgemm@tile=block_x*TX x block_y*TY' \
          --block 8x8,16x8,16x16 -D TX=1..8:pow2 -D TY=1..8:pow2 -D BK=8,16
      cudalab tune --replay matmul-warptile.tune.db --strategy tpe,gp,random --seeds 20 --trials 30
    """
    from cudalab import files  # noqa: PLC0415

    if plot_path is not None:  # '' is a name given empty: refused, not "no file"
        from cudalab.report import plot  # noqa: PLC0415

        plot.check(plot_path)
    if json_path is not None:
        files.check_output_path(json_path, "--json")
    if header_path:
        files.check_output_path(header_path, "--header")
    if versus is not None and replay is None:
        raise UsageError("--versus KT_CACHE compares a finished campaign: give --replay CAMPAIGN too")
    if replay is not None:
        given = [f for f, v in (("--json", json_path), ("--plot", plot_path), ("--header", header_path)) if v]
        if given:  # a replay prints its table and writes no file: an output it would skip is refused, not ignored
            raise UsageError(f"{given[0]} is a live campaign's output: --replay writes no file (leave it out)")
        return _replay(replay, name, strategy, seeds, trials, versus)
    if family is None:
        raise UsageError("cudalab tune FAMILY (or --replay CAMPAIGN): name the family to tune")
    from cudalab.tuning.drive import plan, run_campaign  # noqa: PLC0415
    from cudalab.tuning.options import TuneOptions, parse_duration  # noqa: PLC0415

    pairs = []
    for item in defines:
        k, eq, v = item.partition("=")
        if not eq:
            raise UsageError(f"-D {item!r} must be NAME=VALUES (example: -D WT_BK=8..32:pow2)")
        pairs.append((k, v))
    extra = _family_options(list(ctx.args), family, ctx)
    opts = TuneOptions(
        family=family, variant=variant, n=n, shape=shape, dtype=dtype, defines=tuple(pairs), block=block,
        options=extra, require=require, use_table=not no_table, strategy=strategy,
        trials=trials, time_s=parse_duration(time_text), seed=seed,
        objectives=tuple(o.strip() for o in objective.split(",")), name=name, storage=storage, race=race_k,
        tolerance=tolerance, budget=budget, device=device, timeout=timeout, build_ahead=build_ahead,
        cluster=cluster, devices=devices, add=add)
    p = plan(opts)
    live = _Live(quiet)
    res = run_campaign(p, live)
    live.close()
    _show(res)
    if json_path:
        files.atomic_write(json_path, json.dumps(res.to_dict(), indent=1, default=str) + "\n")
    if plot_path:
        from cudalab.tuning.plot import plot_campaign  # noqa: PLC0415

        plot_campaign(res, plot_path)
    if header_path and res.best_params:
        click.echo(f"header: {res.write_header(header_path)} (and {header_path}.json)", err=True)
    if res.exit_code:
        ctx.exit(res.exit_code)


class _Live:
    """The live line on stderr: trials done / budget, the best so far, trials in flight, builds queued, GPU busy,
    the ETA."""

    def __init__(self, quiet: bool):
        self.quiet, self.tty, self.open = quiet, sys.stderr.isatty(), False

    def __call__(self, what: str, d: dict[str, Any]) -> None:
        if what == "start":
            extra = f", {d['resumed']} trials already in it" if d["resumed"] else ""
            valid = (f"{d['valid']:,} of {d['size']:,} points meet the constraints" if d["valid"] is not None else
                     f"{d['size']:,} points, too many to list: each is checked against the constraints when asked")
            click.echo(f"campaign {d['name']}: {d['url']} ({valid}; {d['strategy']}, {d['budget']} trials{extra})",
                       err=True)
            return
        if what in ("cluster", "warning"):
            self.close()
            click.echo(("cluster: " if what == "cluster" else "warning: ") + d["text"], err=True)
            return
        if self.quiet:
            return
        if what == "trial":
            best = d["best"]
            left = max(0, d["budget"] - d["done"])
            eta = d["elapsed"] / max(1, d["done"]) * left
            head = (f"[{d['done']}/{d['budget']}] best {best.values[0]:.4g}" if best
                    else f"[{d['done']}/{d['budget']}] no passed trial yet")
            tail = (f" · in flight {d['in_flight']}" if "in_flight" in d else "") + f" · builds queued {d['builds']}"
            if d.get("gpu_busy") is not None:
                tail += f" · GPU busy {d['gpu_busy']:.0f}%"
            tail += f" · ETA {int(eta) // 60}:{int(eta) % 60:02d}"
            params = f" ({' '.join(f'{k}={v}' for k, v in best.point.items())})" if best else ""
            if self.tty:  # one terminal line ("\r" rewrites one only): the parameters give way, never a figure
                room = self.width() - 1 - len(head) - len(tail)
                params = params if len(params) <= room else (params[:max(0, room - 2)] + "…)" if room > 4 else "")
            text = head + params + tail
        elif what == "race":
            text = f"racing the best {len(d['contenders'])}"
        elif what == "round":
            r = d["result"]
            text = (f"racing round {d['round']}: interrupted, no winner" if r.interrupted else
                    f"racing round {d['round']}: leader {r.winner} ({'decided' if r.decided else 'undecided'})")
        else:
            return
        if self.tty:
            if len(text) > self.width() - 1:  # a racing line with long names: cut at the end (its figures lead)
                text = text[:self.width() - 2] + "…"
            click.echo("\r\033[K" + text, err=True, nl=False)
            self.open = True
        else:
            click.echo("  " + text, err=True)

    @staticmethod
    def width() -> int:
        """The terminal's columns."""
        return shutil.get_terminal_size((120, 24)).columns

    def close(self) -> None:
        if self.open:
            click.echo("", err=True)
            self.open = False


def _show(res: Any) -> None:
    """The final table, the verdict and the command that reruns the winner."""
    import numpy as np  # noqa: PLC0415

    from cudalab import report  # noqa: PLC0415

    con = report.console()
    race = res.race
    rows = []
    shown = res.feasible[:10] if len(res.objectives) == 1 else list(res.pareto)
    from cudalab.tuning.result import point_key  # noqa: PLC0415

    raced_first = race is not None and len(res.objectives) == 1 and any(point_key(m.point) in race.samples
                                                                         for m in shown)
    if raced_first:
        # The raced rows show the race's medians (interleaved rounds, L2 flushed), the others their one trial's:
        # two measurements, so not one sorted column. The raced first, the winner on top, then the rest.
        def order(m: Any) -> tuple:
            key = point_key(m.point)
            s = race.samples.get(key)
            return (s is None, key != race.winner, float(np.median(s)) if s else m.values[0])

        shown = sorted(shown, key=order)

    for m in shown:
        key = point_key(m.point)
        s = race.samples.get(key) if race is not None else None
        med = float(np.median(s)) if s else m.attrs.get("median_ms")
        iqr = float(np.subtract(*np.percentile(s, [75, 25]))) if s else m.attrs.get("iqr_ms")
        rate = m.attrs.get("gflops") or m.attrs.get("gbs")
        unit = " GFLOP/s" if m.attrs.get("gflops") else " GB/s" if m.attrs.get("gbs") else ""
        sp = res.speedup(key)
        verdict = ""
        if race is not None:
            verdict = ("winner" if key == race.winner else race.verdicts[key].verdict if key in race.verdicts
                       else f"dropped: {race.dropped[key][:40]}" if key in race.dropped else "")
        # the user's own configuration, so "keep yours" and "change to this" read off the table alike
        cells = [f"{key} (default)" if key == res.default_key else key, f"{med:.4f}" if med is not None else "–",
                 f"±{iqr:.4f}" if iqr is not None else "",
                 f"{rate:,.0f}{unit}" if rate else "–", f"{pct:.1f}%" if (pct := res.pct(m)) else "–",
                 f"{sp:.3f}×" if sp else "–", verdict]
        if len(res.objectives) > 1:
            cells.insert(1, f"{m.values[1]:.4g}")
        rows.append(cells)
    cols = ["configuration", "median ms", "±IQR", "rate", res.pct_header, "vs default", "race"]
    if len(res.objectives) > 1:
        cols.insert(1, "energy mJ")
    title = f"{res.family}/{res.variant}: {'Pareto front' if len(res.objectives) > 1 else 'best configurations'}"
    if raced_first:
        title += " (the raced first, by the race's medians; the rest by their trial's)"
    con.print(report.simple_table(cols, rows, title=title, wrap=("configuration", "race")))
    def say(text: str) -> None:  # a closing line, folded at words to the terminal (a number never split)
        echo_folded(text, con.width)

    ref = res.reference
    if ref is not None and ref.rate is None and not res.incomplete:  # why the % column is empty
        say(f"{ref.header}: no {ref.variant} row to divide by ({ref.reason})")
    bad = [m for m in res.trials if m.values is None and m.status not in ("refused", "interrupted")]
    refused = sum(1 for m in res.trials if m.status == "refused")
    cut = sum(1 for m in res.trials if m.status == "interrupted")  # every trial in one count: they add up
    busy = f"; GPU busy {res.gpu_busy_pct:.0f}% while they ran (NVML)" if res.gpu_busy_pct is not None else ""
    say(f"{len(res.trials)} trials: {len(res.feasible)} passed, {len(bad)} infeasible "
               f"(incorrect, failed or timed out), {refused} refused before any build"
        + (f", {cut} interrupted (asked again first when the campaign resumes)" if cut else "") + busy)
    if res.time_account.get("wall"):
        from cudalab.tuning.account import describe as describe_time  # noqa: PLC0415  (tune's modules load late)

        say(describe_time(res.time_account, res.gpu_busy_pct))
    if race is not None and race.winner:
        up = race.runner_up()
        v = race.verdicts.get(up)
        vs = (f"; runner-up {up}: {v.verdict}, {v.ratio:.3f}× [{v.low:.3f}, {v.high:.3f}]"
              if v is not None and v.low is not None else "")
        ties = f"; tied within the tolerance: {', '.join(race.ties)}" if race.ties else ""
        say(f"winner after {race.rounds} racing rounds: {race.winner}{vs}{ties}")
        say(f"racing tolerance {race.tolerance:.2%}" + (f": {race.calibrated}" if race.calibrated else ""))
    unraced = res.incomplete and not (race is not None and race.winner)  # TuneResult.unraced's rule
    if unraced and res.feasible:
        say("not raced: the campaign was interrupted; the best trials above are each one trial's measurement, "
            "no winner is named (the same command continues and races them)")
    elif res.winner and res.winner == res.default_key:  # the default was a trial (its first): it can win
        what = "the winner" if race is not None and race.winner else "the best trial (not raced)"
        say(f"{what} is the family's default configuration: the fastest configuration found, keep it")
    elif race is not None and res.default_key in race.ties:
        say("the family's default configuration is tied with the winner within the tolerance: keeping it "
                   "costs nothing measurable")
    if res.command and not unraced:
        click.echo(f"rerun: {res.command}")
    if res.incomplete:
        click.echo("INCOMPLETE: interrupted; the campaign keeps what finished (the same command continues it)")


def _replay(campaign: str, name: str | None, strategy: str | None, seeds: int, trials: int | None,
            versus: str | None = None) -> None:
    from cudalab import report  # noqa: PLC0415
    from cudalab.tuning import interchange as KT  # noqa: PLC0415
    from cudalab.tuning import replay as RP  # noqa: PLC0415
    from cudalab.tuning.result import point_key  # noqa: PLC0415

    url = campaign if "://" in campaign else f"sqlite:///{Path(campaign).absolute()}"  # a link stays one: refused
    if "://" not in campaign and not Path(campaign).is_file() and not Path(campaign).is_symlink():
        raise UsageError(f"--replay {campaign}: no such campaign file")
    if campaign.endswith(".json"):  # a kernel_tuner cache: its measurements are the replay data
        kt, table, attrs = KT.load_kt_cache(campaign)
        space = kt.space
        attrs = {"family": attrs.get("kernel"), "variant": f"kernel_tuner on {attrs.get('device')}"}
    else:
        space, table, attrs = RP.load_campaign(url, name)
    if not any(v is not None for v in table.values()):
        raise UsageError(f"--replay {campaign}: no configuration in it passed: nothing to replay or compare")
    if versus is not None:  # the same space measured by both tools, side by side
        _, theirs, facts = KT.load_kt_cache(versus)
        rows, lines = KT.side_by_side(table, theirs)
        report.console().print(report.simple_table(["configuration", "cudalab ms", "rank", "kernel_tuner ms", "rank"],
                                                   rows, title=f"{attrs.get('family')}/{attrs.get('variant')}: cudalab "
                                                               f"and kernel_tuner ({facts.get('device')})"))
        for line in lines:
            click.echo(line)
        return
    # no strategy asks a configuration twice, so past those measured its curve is flat: trials beyond them would
    # only cost memory (seeds x trials) and time
    n = min(trials or max(1, len(table) // 10), len(table))
    names = [s.strip() for s in (strategy or "tpe,random").split(",")]
    t0 = time.monotonic()
    results = [RP.replay(space, table, s, seeds, n, first=attrs.get("default")) for s in names]
    marks = RP.checkpoints(n, len(table))
    title = (f"replay of {attrs.get('family')}/{attrs.get('variant')} ({len(table)} configurations measured): "
             f"median fraction of the best after N trials (seeds at >= 95%)")
    report.console().print(report.simple_table(["strategy", *[f"N={m}" for m in marks]], RP.table_rows(results, marks),
                                               title=title))
    dflt = attrs.get("default")
    key = point_key({d.name: str(dflt.get(d.name)) for d in space.dims}) if dflt else ""
    if table.get(key) is not None:  # say it: a space whose default is its best makes every strategy look perfect
        best = min(v for v in table.values() if v is not None)
        click.echo(f"each seed's first trial is the family's default configuration, as in a live campaign: "
                   f"{key} ({100 * best / table[key]:.1f}% of the best)")
    click.echo(f"{len(names)} strategies × {seeds} seeds in {time.monotonic() - t0:.1f} s")
