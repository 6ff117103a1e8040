"""Where a planned point runs: the local pool of isolated GPU workers (:mod:`.local`) or a Dask cluster
(:mod:`.dask`), and the handle on a worker started under a tool (:mod:`.toolchild`). Importing the package
imports none of them: the command line starts a worker through :mod:`.local.process` before anything heavy.
"""
