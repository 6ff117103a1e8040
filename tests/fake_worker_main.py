"""A stand-in GPU worker for the parent's tests: speaks cudalab's worker protocol without a GPU.

Run as ``python fake_worker_main.py --fd K --device N``. What it does per variant comes from the
environment variable ``FAKE_WORKER`` (JSON: variant name -> behaviour; ``_open`` for the start,
``roofline`` for the roofline operation):

- ``pass`` (default): a passed row (1 ms, 100 GB/s), or skipped where the launch rules refuse it.
- ``hang``: says it is running the variant, then never answers again.
- ``die``: says it is running the variant, then kills itself with SIGSEGV.
- ``half``: writes half of the row's line, then exits.
- ``lost``: a failed row naming a sticky CUDA error, then ``lost``, then exits (as a real worker does).
- ``slow``: runs for 1 s, beating every 0.1 s, then passes (beats keep a long kernel alive).
- ``sigint`` / ``sigterm``: sends that signal to the parent (a user's Ctrl-C, a batch system), then hangs.
- ``error`` (``_open`` only): cannot open its GPU (``_open_s``: seconds it takes to open it).
- ``linger`` (``_exit`` only): goes on for 1.5 s after its ``bye`` (a driver tearing a context down).

A key ``VARIANT@N`` (``naive@96``) applies to that variant at ``--n N`` only, before the plain name; a
key ``VARIANT#NAME=VALUE`` (``vec4#UNROLL=3``) to that variant where the point's define NAME is VALUE
(``VARIANT#block=256`` matches the point's block), before both. ``incorrect`` gives an incorrect row, ``skip``
a skipped one (a library row without CuPy).

Tuning campaigns: ``_ms`` is a Python expression over the point's integer defines and ``threads`` (the
block's), the passed row's median in ms (``1 + abs(UNROLL - 5) / 10``); ``_mj`` the same for its energy
per launch; ``_delay`` seconds each row takes. ``_ms`` may also name ``variant`` (the row's name), ``launch``
(the protocol's ``--launch``) and ``hot`` (1 with ``--hot``); its GFLOP/s (the family's FLOPs) and, for an
item-rate family, its ``rate`` (the first dimension's elements) follow from that time; and its row says what timed it as a real worker
would (``timed_by``: the method asked, ``auto`` being :func:`cudalab.bench.auto_method` (cupti with
``FAKE_CUPTI_LOADS=1`` unless ``CUDALAB_NO_CUPTI`` is set, else graph), for a row under 20 µs that can be batched; else
``events``), ``cudalab truth``'s methods told apart.

``FAKE_GPU_NAME`` and ``FAKE_CUDA`` change the GPU's name and CUDA version (a cluster of mixed GPUs).

With ``FAKE_WORKER_BUSY`` set (a folder), a file named after the worker's pid is there while a point sleeps
its ``_delay``: a test that kills a worker picks one with a trial in flight. With ``FAKE_WORKER_LOG`` set, every operation's name is appended to that file; with ``FAKE_WORKER_ROWS``, every variant a point runs. With ``FAKE_WORKER_CUBINS`` set,
each point appends to that file whether its kernels' cubins were in the build cache when it arrived (a
cluster's prebuilds). With ``FAKE_WORKER_STAMPS``, each passed row appends the time it was sent (scripts/bench_scale.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from cudalab import plan as planning
from cudalab.bench import auto_method, summarize
from cudalab.errors import LaunchConfigError, UsageError
from cudalab.records.results import FAILED, INCORRECT, PASSED, SKIPPED, Result
from cudalab.worker import cupti_timing  # no cupti import: switched_off reads the environment
from cudalab.worker.protocol import decode, encode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(args.fd, "wb", buffering=0)
    how = json.loads(os.environ.get("FAKE_WORKER", "{}"))

    def send(**msg):
        out.write(encode(msg))

    if how.get("_open") == "error":
        send(ev="error", message="no CUDA GPU found (fake)", exit_code=2)
        return
    if how.get("_open_s"):  # a GPU slow to open (seconds before ``ready``): what a campaign does meanwhile
        time.sleep(float(how["_open_s"]))
    name = os.environ.get("FAKE_GPU_NAME", f"Fake GPU {args.device}")  # a cluster test's other GPU model
    info = {"index": args.device, "name": name, "compute_capability": "9.0", "sm_count": 132,
            "total_memory": 80 << 30, "l2_bytes": 50 << 20, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
            "bus_width_bits": 5120, "driver_version": "13.0", "cuda_version": os.environ.get("FAKE_CUDA", "13.0")}
    send(ev="ready", device=info, pid=os.getpid(), count=int(how.get("_count", 1)))
    for line in sys.stdin:
        msg = decode(line)
        if msg is None:
            continue
        if os.environ.get("FAKE_WORKER_LOG"):  # what the parent asked of its worker, for tests to read
            with open(os.environ["FAKE_WORKER_LOG"], "a") as log:
                log.write(msg["op"] + "\n")
        if msg["op"] == "exit":
            break
        if msg["op"] == "info":
            send(ev="info", device=info, free=60 << 30, roofline={"gbs": 200.0, "source": "memcpy_dtod",
                                                                 "dtod_gbs": 200.0}, reason="")
            continue
        if os.environ.get("FAKE_WORKER_NO_PLANNING"):  # a test that counts plans: the worker must plan nothing
            planning.precheck = planning.make_problem = None  # type: ignore[assignment]
        run = planning.Plan.from_dict(msg["plan"])  # the parent's plan, read back as a real worker does
        req = run.request
        if msg["op"] == "roofline":
            if how.get("roofline") == "die":
                os.kill(os.getpid(), signal.SIGSEGV)
            send(ev="stage", variant="roofline", stage="running", watch=True)
            send(ev="roofline", id=msg["id"], roofline={"gbs": 200.0, "source": "memcpy_dtod", "dtod_gbs": 200.0},
                 reason="")
            continue
        if os.environ.get("FAKE_WORKER_CUBINS") and msg["op"] == "point":  # were its kernels built before it began?
            with open(os.environ["FAKE_WORKER_CUBINS"], "a") as log:
                log.write(" ".join(_cubins(run)) + "\n")
        names = {k: int(v) for k, v in req.defines if str(v).lstrip("-").isdigit()}
        if req.block:
            dims = [int(x) for x in req.block.split("x")]
            names["threads"] = dims[0] * (dims[1] if len(dims) > 1 else 1) * (dims[2] if len(dims) > 2 else 1)
        by_point = [k for k in how if "#" in k and (k.split("#")[1] in {f"{n}={v}" for n, v in req.defines}
                                                     or k.split("#")[1] == f"block={req.block}")]
        send(ev="stage", variant="inputs", stage="preparing", watch=False)
        for v in run.variants:
            mine = [k for k in by_point if k.split("#")[0] == v.name]
            b = how[mine[0]] if mine else how.get(f"{v.name}@{req.n}", how.get(v.name, "pass"))
            if how.get("_delay"):
                busy = os.environ.get("FAKE_WORKER_BUSY")  # a folder: this worker's pid while it sleeps in a point
                if busy:
                    Path(busy, str(os.getpid())).touch()
                time.sleep(float(how["_delay"]))
                if busy:
                    Path(busy, str(os.getpid())).unlink(missing_ok=True)
            if os.environ.get("FAKE_WORKER_ROWS"):  # which variants were run, for tests that count a row's runs
                with open(os.environ["FAKE_WORKER_ROWS"], "a") as log:
                    log.write(v.name + "\n")
            send(ev="stage", variant=v.name, stage="compiling", watch=False)
            send(ev="stage", variant=v.name, stage="running", watch=True)
            if b == "hang":
                time.sleep(3600)
            if b == "die":
                os.kill(os.getpid(), signal.SIGSEGV)
            if b == "half":
                out.write(b'{"ev":"row","row":{"variant":"' + v.name.encode())
                os._exit(1)
            if b == "lost":
                row = Result(v.name, v.kind, FAILED, reason="the GPU reported an error: an illegal memory access "
                             "was encountered (find where: cudalab sanitize ...)")
                send(ev="row", row=row.to_dict(), output=None)
                send(ev="lost", reason="an illegal memory access was encountered")
                os._exit(0)
            if b in ("sigint", "sigterm"):
                os.kill(os.getppid(), signal.SIGINT if b == "sigint" else signal.SIGTERM)
                time.sleep(3600)
            if b == "slow":
                for _ in range(10):
                    time.sleep(0.1)
                    send(ev="beat")
            try:
                lau = (planning.plan_launch(v, run.family, run.problem, req.block, req.grid, overrides=req.defines)
                       if v.kind == "kernel" else None)
            except (UsageError, LaunchConfigError) as exc:
                send(ev="row", row=Result(v.name, v.kind, SKIPPED, reason=str(exc)).to_dict(), output=None)
                continue
            block = "x".join(map(str, lau.block)) if lau else ""
            if b == "skip":  # as a library row on a GPU without CuPy
                send(ev="row", row=Result(v.name, v.kind, SKIPPED, reason="CuPy is not installed (fake)").to_dict(),
                     output=None)
                continue
            if b == "incorrect":
                send(ev="row", row=Result(v.name, v.kind, INCORRECT, reason="max error 1.0 > tolerance 1e-05 (fake)",
                                          max_error=1.0).to_dict(), output=None)
                continue
            env = dict(names, variant=v.name, launch=req.protocol.launch, hot=int(not req.protocol.flush_l2))
            ms = float(eval(how["_ms"], {"abs": abs}, env)) if "_ms" in how else 1.0  # noqa: S307 (a test's own text)
            extra = {"energy_mj_per_launch": float(eval(how["_mj"], {"abs": abs}, dict(names)))} if "_mj" in how else {}  # noqa: S307
            gflops = None
            if "_ms" in how:
                # auto as a real worker picks it: CUPTI where cupti-python loads (FAKE_CUPTI_LOADS=1 here, unless
                # CUDALAB_NO_CUPTI switches it off), graph replay otherwise
                loads = os.environ.get("FAKE_CUPTI_LOADS") == "1" and not cupti_timing.switched_off()
                method = auto_method(loads) if req.protocol.launch == "auto" else req.protocol.launch
                short = ms < req.protocol.batch_below_ms and method != "events"
                extra.update(timed_by=method if short else "events", **({"batch": 64} if short else {}))
                # the rates a real worker gives: the family's FLOPs, or its items (elements), over the time
                flops = run.family.work(run.problem).flops
                gflops = flops / (ms * 1e-3) / 1e9 if flops else None
                if run.spec.metric == "rate":
                    extra["rate"] = run.problem.dims[0] / (ms * 1e-3) / 1e9
            row = Result(v.name, v.kind, PASSED, block=block, grid="1x1", stats=summarize([ms] * 3 + [ms * 1.001] * 7 if "_ms" in how else [1.0, 1.0, 1.0]),
                         gbs=100.0, gflops=gflops, max_error=0.0, extra=extra)
            send(ev="row", row=row.to_dict(), output=None)
            if os.environ.get("FAKE_WORKER_STAMPS"):  # when each passed row was sent (a scale benchmark's clock)
                with open(os.environ["FAKE_WORKER_STAMPS"], "a") as log:
                    log.write(f"{time.time():.6f}\n")
        send(ev="done", id=msg["id"], inputs=None)
    send(ev="bye", telemetry={"note": "fake worker: no telemetry"})
    if how.get("_exit") == "linger":  # a context's tear-down that takes a while after the bye
        time.sleep(1.5)


def _cubins(run: planning.Plan) -> list[str]:
    """``UNROLL=3:cached`` (or ``:missing``) per kernel variant of ``run``: whether the build cache held its cubin
    for this fake GPU's arch (sm_90) when the point arrived. A real worker would build it now."""
    from cudalab import build  # noqa: PLC0415

    req, out = run.request, []
    for v in run.variants:
        if v.kind != "kernel":
            continue
        lau = planning.plan_launch(v, run.family, run.problem, req.block, req.grid, overrides=req.defines)
        hit = build.cached(run.spec.directory / v.source, dict(lau.defines), planning.variant_arch(v, "sm_90"))
        out.append(",".join(f"{k}={x}" for k, x in req.defines) + (":cached" if hit else ":missing"))
    return out


if __name__ == "__main__":
    main()
    os._exit(0)
