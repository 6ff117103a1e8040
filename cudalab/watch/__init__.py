"""``cudalab watch``: the edit–run loop (:mod:`~cudalab.watch.core`), its file events
(:mod:`~cudalab.watch.events`: watchfiles where installed, polling otherwise) and its screen
(:mod:`~cudalab.watch.screen`)."""
