"""``python -m cudalab``."""

from cudalab.main import main

main()
