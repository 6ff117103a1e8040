"""``--cluster local|ADDRESS``: run planned points on a Dask cluster, one Dask worker per GPU.

The parent stays the driver: it plans every point once (:func:`cudalab.plan.precheck`), submits the plans as
data (``client.submit``, resource ``GPU=1``, ``retries``), gathers results as they complete and writes each
where it belongs the moment it arrives. On each Dask worker a cudalab GPU worker process runs the plan
(:mod:`cudalab.execute.dask.cluster_worker`). Dask does the scheduling, the retries when a worker dies and the
dashboard; nothing here schedules.

Checked before any point runs (one line, exit 2): a scheduler that does not answer, a cluster without a
GPU worker, a worker with another cudalab (or one that cannot run cudalab's tasks), workers of different
CUDA versions. A scheduler lost mid-run raises :class:`~cudalab.errors.ClusterLost`: what finished is kept.
"""

from __future__ import annotations

import collections
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from cudalab.errors import ClusterError, ClusterLost, UsageError
from cudalab.plan import Plan
from cudalab.execute.dask import cluster_worker as CW
from cudalab.execute.dask.completions import TICK_S, Completions
from cudalab.execute.dask.dask_connect import connect, one_line
from cudalab.execute.dask.localcluster import close_local, local_cluster

__all__ = ["LOCAL", "parse_cluster", "GpuWorker", "Cluster", "one_line"]

LOCAL = "local"
#: Seconds to wait for a scheduler's answer (``--cluster tcp://...``).
CONNECT_S = 10.0
#: Seconds the workers may take to open their GPUs (a CUDA context, pycuda, NumPy: seconds on a real host).
OPEN_S = 300.0
#: How many times Dask runs a task again after it raised (a worker that died mid-task is Dask's own retry).
RETRIES = 3
#: Seconds without a scheduler before the run is declared lost.
LOST_S = 10.0
def parse_cluster(text: str | None) -> str | None:
    """``--cluster``: ``local``, a scheduler address (``tcp://HOST:PORT``, ``tls://...``) or None.

    Raises:
        UsageError: anything else.
    """
    if text is None:
        return None
    t = text.strip()
    if t.lower() == LOCAL:
        return LOCAL
    scheme, sep, rest = t.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or scheme not in ("tcp", "tls", "ucx", "inproc") or not host or not colon or not port.isdigit():
        raise UsageError(f"--cluster {text!r} is not 'local' nor a scheduler address (example: --cluster tcp://gpu1:8786)")
    return t


@dataclass(frozen=True)
class GpuWorker:
    """A Dask worker whose GPU opened: its address, host, GPU model and facts."""

    address: str
    host: str
    gpu: str
    visible: str
    info: dict[str, Any]
    builds: int = 0  # its build threads (resource BUILD): prebuilds may be sent to its host

    @property
    def arch(self) -> str:
        """Its GPU's architecture (``sm_90``; '' when the GPU did not say)."""
        cc = str(self.info.get("compute_capability", ""))
        return "sm_" + cc.replace(".", "") if cc else ""


class Cluster:
    """The driver's handle on a Dask cluster of cudalab GPU workers (:meth:`open` checks it).

    Attributes:
        address: what ``--cluster`` said (``local`` or the scheduler's address).
        workers: the GPU workers that opened their GPU.
        given_back: (host, why) of GPU workers that could not open theirs.
    """

    def __init__(self, client: Any, cluster: Any, address: str):
        self.client, self._cluster, self.address = client, cluster, address
        self.workers: list[GpuWorker] = []
        self.given_back: list[tuple[str, str]] = []
        self._lost_since: float | None = None

    # --- opening and checking ---------------------------------------------------------------------
    @classmethod
    def open(cls, address: str, devices: Sequence[int] = (0,), energy: bool = False,
             env: dict[int, dict[str, str]] | None = None) -> "Cluster":
        """Connect (``local``: start one worker per GPU of ``devices``) and check the cluster.

        Raises:
            ClusterError: no answer, no GPU worker, another cudalab or CUDA, no GPU that opens.
            UsageError: the ``cluster`` extra is not installed.
        """
        try:
            from distributed import Client  # noqa: PLC0415
        except ImportError:
            raise UsageError("--cluster needs Dask: pip install 'cudalab[cluster]'") from None
        # Dask's own log lines (a reconnect's traceback, a worker restarted) are not the user's: cudalab says
        # in one line what happened to the run. asyncio's too: a Nanny left starting when Ctrl-C ends the start
        # fails later in the event loop, and asyncio's "exception was never retrieved" (no handler: Python's last
        # resort prints it) put a traceback under the one line (hostile pass, 1 of 417: "RuntimeError: Nanny
        # failed to start.").
        for name in ("distributed", "asyncio"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        cluster = None
        try:
            if address == LOCAL:
                cluster = local_cluster(devices, env)
                client = Client(cluster, set_as_default=False)
            else:
                client = connect(Client, address, CONNECT_S)
        except BaseException as exc:  # noqa: BLE001  (Dask's and the comms' errors are many: each is one line)
            if cluster is not None:  # Ctrl-C too: a cluster left to Dask's atexit hook printed a traceback
                close_local(cluster)
            if not isinstance(exc, Exception) or address == LOCAL and not isinstance(exc, (OSError, TimeoutError)):
                raise
            raise ClusterError(f"--cluster {address}: no Dask scheduler answers there ({one_line(exc)}); start one "
                               "with: dask scheduler --port 8786") from None
        out = cls(client, cluster, address)
        try:
            out.check(energy)
        except BaseException:
            out.close()
            raise
        return out

    def check(self, energy: bool = False) -> None:
        """Open every GPU worker's GPU (warm once) and check that they can run this driver's plans.

        Raises:
            ClusterError: no GPU worker, a worker of another cudalab or CUDA version, no GPU that opens.
        """
        from distributed import wait  # noqa: PLC0415

        deadline = time.monotonic() + CONNECT_S  # workers started with the scheduler may still be joining
        while True:
            workers = self.client.scheduler_info(n_workers=-1)["workers"]
            gpu = [a for a, w in workers.items() if (w.get("resources") or {}).get(CW.RESOURCE, 0) >= 1]
            if gpu or time.monotonic() > deadline:
                break
            time.sleep(TICK_S)
        if not gpu:
            raise ClusterError(f"--cluster {self.address}: {len(workers)} Dask worker(s) and none with a GPU (start one "
                               f"per GPU: CUDA_VISIBLE_DEVICES=N dask worker {self._scheduler()} --nthreads 8 "
                               "--resources GPU=1,BUILD=7; docs/cluster.md)")
        probes = {a: self.client.submit(CW.probe, energy, workers=[a], resources={CW.RESOURCE: 1},
                                        allow_other_workers=False, pure=False, key=f"cudalab-probe-{uuid.uuid4().hex}")
                  for a in gpu}
        try:
            with self.client.as_current():
                wait(list(probes.values()), timeout=OPEN_S)
        except TimeoutError:
            self.client.cancel(list(probes.values()), force=True)
            raise ClusterError(f"--cluster {self.address}: the GPU workers did not open their GPUs within "
                               f"{OPEN_S:.0f} s") from None
        mine = CW.wire_version()
        refused: list[str] = []
        for a, f in probes.items():
            if f.status != "finished":
                raise ClusterError(f"--cluster {self.address}: the worker at {a} cannot run cudalab's tasks "
                                   f"({one_line(f.exception())}): install this cudalab ({mine}) there")
            r = f.result()
            if r.get("cudalab") != mine:
                raise ClusterError(f"--cluster {self.address}: the worker at {a} ({r.get('host')}) runs cudalab "
                                   f"{r.get('cudalab')}, this driver {mine}: install the same cudalab on every host")
            if r.get("error"):
                self.given_back.append((str(r.get("host")), str(r["error"])))
                self.client.run(_no_gpu, workers=[a])  # the scheduler sends it no GPU work
                refused.append(a)
                continue
            builds = int((workers[a].get("resources") or {}).get(CW.BUILD, 0))
            self.workers.append(GpuWorker(a, str(r["host"]), str(r["gpu"]), str(r.get("visible", "")), dict(r["info"]),
                                          builds))
        self._await_no_gpu(refused)
        if not self.workers:
            host, why = self.given_back[0]
            raise ClusterError(f"--cluster {self.address}: no GPU worker could open its GPU ({host}: {why})")
        cudas = collections.Counter(str(w.info.get("cuda_version", "")) for w in self.workers)
        if len(cudas) > 1:
            raise ClusterError(f"--cluster {self.address}: the GPU workers run different CUDA versions "
                               f"({', '.join(f'{n} x CUDA {v}' for v, n in cudas.items())}): use one CUDA on every host")

    def _await_no_gpu(self, addresses: Sequence[str]) -> None:
        """Wait until the scheduler knows these workers hold no GPU (a worker tells it after ``set_resources``):
        a point submitted before that could go to a worker whose GPU does not open and be handed back again
        and again (seen as a hang in a CI run)."""
        deadline = time.monotonic() + CONNECT_S
        while addresses and time.monotonic() < deadline:
            workers = self.client.scheduler_info(n_workers=-1)["workers"]
            if all((workers.get(a, {}).get("resources") or {}).get(CW.RESOURCE, 0) < 1 for a in addresses):
                return
            time.sleep(TICK_S)

    def _scheduler(self) -> str:
        return self.client.scheduler.address if self.client.scheduler is not None else self.address

    # --- what it is ---------------------------------------------------------------------------------
    def models(self) -> collections.Counter:
        """GPU model -> how many workers have one."""
        return collections.Counter(w.gpu for w in self.workers)

    def facts(self) -> dict[str, Any]:
        """The GPUs' facts as a record keeps them: the first GPU's, every GPU's under ``devices``, the cluster."""
        infos = [dict(w.info, host=w.host, worker=w.address) for w in self.workers]
        return {**(infos[0] if infos else {}), **({"devices": infos} if len(infos) > 1 else {}), "cluster": self.address}

    def describe(self) -> str:
        """``4 x NVIDIA H100 80GB HBM3 on 1 host (gpu1); dashboard http://...`` (the live line's first words)."""
        hosts = sorted({w.host for w in self.workers})
        gpus = ", ".join(f"{n} x {m}" for m, n in self.models().items())
        dash = self.dashboard()
        return (f"{gpus} on {len(hosts)} host{'s' if len(hosts) > 1 else ''} ({', '.join(hosts[:4])}"
                f"{', ...' if len(hosts) > 4 else ''})" + (f"; dashboard {dash}" if dash else ""))

    def dashboard(self) -> str:
        """The Dask dashboard's address ('' when there is none)."""
        try:
            port = self.client.scheduler_info().get("services", {}).get("dashboard")
            host = self._scheduler().split("://", 1)[-1].rsplit(":", 1)[0]
        except Exception:  # a scheduler that went away
            return ""
        return f"http://{host}:{port}/status" if port else ""

    def one_model(self) -> str:
        """The GPU model every worker has.

        Raises:
            ClusterError: the workers have several (a campaign ranks on one model).
        """
        models = self.models()
        if len(models) > 1:
            raise ClusterError(f"--cluster {self.address} mixes GPU models ({', '.join(f'{n} x {m}' for m, n in sorted(models.items()))}):"
                               " a campaign ranks configurations on one model; run one campaign per model, each on "
                               "a scheduler whose workers have that model (with --name NAME-MODEL)")
        return next(iter(models))

    # --- running ------------------------------------------------------------------------------------
    def submit(self, plans: Sequence[Plan], energy: bool = False, timeout: float | None = None) -> Any:
        """Run ``plans`` back to back on one GPU worker (a Dask future of :func:`cluster_worker.run_plans`)."""
        return self.client.submit(CW.run_plans, [p.to_dict() for p in plans], energy, timeout,
                                  resources={CW.RESOURCE: 1}, retries=RETRIES, pure=False,
                                  key=f"cudalab-point-{uuid.uuid4().hex}")

    def prebuild(self, plan: Plan, worker: GpuWorker) -> Any:
        """Build ``plan``'s kernels for ``worker``'s GPU on a build thread of ``worker``'s host (a Dask future of
        :func:`cluster_worker.prebuild`; the trial's GPU task is not tied to it: dropping it costs nothing).

        The host, not the worker: any worker of that host fills the same build cache. No retries: a build lost
        with its worker is the GPU task's to make.
        """
        return self.client.submit(CW.prebuild, plan.to_dict(), worker.arch, workers=[_host(worker.address)],
                                  resources={CW.BUILD: 1}, allow_other_workers=False, pure=False,
                                  key=f"cudalab-build-{uuid.uuid4().hex}")

    def completed(self, futures: Iterable[Any]) -> Iterator[tuple[Any, dict[str, Any] | BaseException]]:
        """Each future with its result (or the exception it ended with) as it completes.

        Raises:
            ClusterLost: the scheduler went away (the futures were cancelled under us, or no answer for
                :data:`LOST_S`).
        """
        done = Completions(self)
        for f in futures:
            done.add(f)
        while done.pending:
            yield done.next()

    def _lost(self) -> ClusterLost:
        return ClusterLost(f"--cluster {self.address}: the Dask scheduler went away mid-run; what finished is kept "
                           "(the same command continues)")

    def _watch(self) -> None:
        if self.client.status in ("running", "newly-created"):
            self._lost_since = None
            return
        self._lost_since = self._lost_since or time.monotonic()
        if time.monotonic() - self._lost_since > LOST_S:
            raise ClusterLost(f"--cluster {self.address}: no answer from the Dask scheduler for {LOST_S:.0f} s; "
                              "what finished is kept (the same command continues)")

    def cancel(self, futures: Iterable[Any]) -> None:
        """Cancel these futures (Ctrl-C: the cluster's in-flight trials stop)."""
        todo = [f for f in futures if not f.done()]
        if todo and self.client.status == "running":
            try:
                self.client.cancel(todo, force=True)
            except Exception:  # a scheduler already gone: nothing runs anymore
                pass

    def close(self) -> None:
        """Disconnect (and stop a local cluster: its workers end their GPU workers)."""
        try:
            self.client.close(timeout=5)
        except Exception:  # a scheduler that is gone
            pass
        if self._cluster is not None:
            close_local(self._cluster)


def _host(address: str) -> str:
    """The host part of a Dask address (``tcp://10.0.0.5:40123`` -> ``10.0.0.5``), as Dask's ``workers=`` takes it."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")


def _no_gpu(dask_worker: Any = None) -> None:
    """On a Dask worker whose GPU did not open: hold no ``GPU`` resource (no GPU work comes to it)."""
    dask_worker.loop.add_callback(dask_worker.set_resources, **{CW.RESOURCE: 0})
