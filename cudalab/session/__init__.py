"""What a run is: its options, its points planned once each, and its record.

:mod:`.options` (the typed options), :mod:`.run` (one family run from typed options), :mod:`.sweep` (the points
of a sweep and their record), :mod:`.point` (the rows of one point). Where the points run is
:mod:`cudalab.execute`'s.
"""
