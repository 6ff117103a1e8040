"""The Dask engine (``--cluster``): planned points as Dask tasks, each Dask worker driving a GPU worker of its own.

:mod:`.cluster` (the driver's side), :mod:`.cluster_points` (a point's rows from a task's result),
:mod:`.cluster_worker` (what runs inside a Dask worker), :mod:`.completions` (results as they come),
:mod:`.dask_connect` (a scheduler reached within a bounded time).
"""
