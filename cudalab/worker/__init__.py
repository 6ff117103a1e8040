"""GPU workers: the processes that hold the CUDA contexts of a run (:mod:`cudalab.worker.serve`), and
the messages they exchange with the parent (:mod:`cudalab.worker.protocol`)."""
