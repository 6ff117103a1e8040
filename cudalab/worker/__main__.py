"""``python -m cudalab.worker``: see :mod:`cudalab.worker.serve`."""

import sys

from cudalab.worker.serve import main

sys.exit(main())
