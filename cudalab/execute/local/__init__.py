"""The local engine: one isolated GPU worker process per GPU of this host.

:mod:`.engine` (the engine), :mod:`.drive` (points on workers, the watchdog), :mod:`.slot` and :mod:`.process` (one GPU's worker as the
parent sees it), :mod:`.devices` (``--devices``).
"""
