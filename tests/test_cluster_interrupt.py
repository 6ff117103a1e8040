"""Ctrl-C is the driver's (issue 57): a terminal sends it to every process of its group, and a Dask worker process
of ``--cluster local`` still importing printed its KeyboardInterrupt's traceback under cudalab's line. The local
cluster's worker processes are born with SIGINT blocked (:func:`cudalab.execute.dask.localcluster._loop_without_sigint`),
and a Ctrl-C that reaches click before a command kept anything is one line and exit 130."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path

import pytest

CHILDREN = '''
import os, sys
from cudalab.execute.dask.localcluster import close_local, local_cluster

def children(pid):
    for p in os.listdir("/proc"):
        try:
            status = open(f"/proc/{p}/status").read()
        except (OSError, ValueError):
            continue
        if p.isdigit() and f"\\nPPid:\\t{pid}\\n" in status:
            yield open(f"/proc/{p}/cmdline").read(), status

if __name__ == "__main__":
    c = local_cluster([0])
    try:
        for cmd, status in children(os.getpid()):
            if "spawn_main" in cmd:  # a Nanny's worker process
                print(int(next(x.split()[1] for x in status.splitlines() if x.startswith("SigBlk")), 16))
    finally:
        close_local(c)
'''


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None or not Path("/proc/self/status").exists(),
                    reason="needs Dask (the cluster extra) and Linux's /proc")
def test_the_local_clusters_worker_processes_are_born_deaf_to_ctrl_c(tmp_path):
    script = tmp_path / "children.py"  # a file: multiprocessing's spawn re-imports the main module
    script.write_text(CHILDREN)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    masks = [int(x) for x in out.stdout.split()]
    assert out.returncode == 0 and masks, out.stderr[-2000:]
    assert all(m & (1 << (signal.SIGINT - 1)) for m in masks), (masks, out.stderr[-2000:])


def test_ctrl_c_before_a_command_kept_anything_is_one_line_and_130(invoke, tmp_path, monkeypatch):
    from cudalab.records import results

    def interrupted(path):
        raise KeyboardInterrupt

    monkeypatch.setattr(results, "load_record", interrupted)
    res = invoke("report", str(tmp_path / "run.json"))
    assert res.exit_code == 130 and res.output == "cudalab: interrupted\n", res.output  # not click's blank line first


def test_an_exception_the_event_loop_never_retrieved_prints_nothing_once_a_cluster_was_opened(monkeypatch, caplog):
    """A Nanny left starting by Ctrl-C fails later in the event loop; asyncio's "exception was never retrieved"
    (Python's last-resort handler prints it) put "RuntimeError: Nanny failed to start." under the one line."""
    pytest.importorskip("distributed")
    import asyncio
    import gc
    import logging

    from cudalab.errors import ClusterError
    from cudalab.execute.dask import cluster as CL

    for name in ("distributed", "asyncio"):  # the test's process keeps its own levels afterwards
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    monkeypatch.setattr(CL, "CONNECT_S", 0.5)
    with pytest.raises(ClusterError):
        CL.Cluster.open("tcp://127.0.0.1:1")

    async def nanny() -> None:
        raise RuntimeError("Nanny failed to start.")

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(nanny())
        loop.run_until_complete(asyncio.sleep(0.01))
        del task
        gc.collect()
    finally:
        loop.close()
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
