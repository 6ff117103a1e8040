"""The GPU side of a run: everything that runs in a GPU process, and the protocol the parent speaks to it.

The parent imports only :mod:`.protocol` (the messages and their serialisation). The rest is the worker's
engine: :mod:`.serve` (the worker's loop), :mod:`.early` (its first point, read while the GPU starts),
:mod:`.executor` (build, upload, poison, verify and time one point's rows), :mod:`.gpu` and
:mod:`.devarray` (the only pycuda code), :mod:`.sampling` and :mod:`.verify`, :mod:`.roofline` (the
copy it measures), :mod:`.warm` (the driver started while Python imports), :mod:`.heartbeat` (its sign of
life), :mod:`.own_kernels` and :mod:`.child` (a worker started under ncu or compute-sanitizer).
"""
