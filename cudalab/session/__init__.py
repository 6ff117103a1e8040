"""What a run is: its options, its points planned once each, and its record.

:mod:`.options` (the typed options), :mod:`.run` (one family run from typed options), :mod:`.sweep` (the points
of a sweep, planned, run on an executor, and their record). Where the points run, and the rows each point gets
back (:mod:`cudalab.execute.point`), are :mod:`cudalab.execute`'s.
"""
