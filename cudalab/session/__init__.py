"""The parent's side of a run: the points planned and driven on GPU workers.

:mod:`.run` (one family run from typed options), :mod:`.sweep` (the points of a sweep and their record),
:mod:`.drive` (points on workers, the watchdog), :mod:`.slot` and :mod:`.process` (one GPU's worker as the
parent sees it), :mod:`.signals` (Ctrl-C and SIGTERM), :mod:`.devices` (``--devices``). Importing the
package imports none of them: the command line starts a worker through :mod:`.process` before anything heavy.
"""
