"""Runs of runs: :mod:`.truth` (one point timed by every method, ncu beside) and :mod:`.calibrate` (the noise
of this machine's measurements)."""
