"""The Dask engine (``--cluster``): planned points as Dask tasks, each Dask worker driving a GPU worker of its own.

:mod:`.engine` (the engine: points as tasks, rows as they come back), :mod:`.cluster` (the driver's handle on a cluster),
:mod:`.cluster_worker` (what runs inside a Dask worker), :mod:`.completions` (results as they come),
:mod:`.dask_connect` (a scheduler reached within a bounded time).
"""
