"""Rich tables, markdown, JSON and CSV: the only place (with :mod:`cudalab.progress`) that imports rich.

:mod:`~cudalab.report.core`: run tables and headers (printed on :mod:`~cudalab.report.console`); :mod:`~cudalab.report.compare`: saved-run
comparisons; :mod:`~cudalab.report.tools`: ncu and compute-sanitizer tables.
"""

from cudalab.report.compare import *  # noqa: F401,F403
from cudalab.report.compare import comparison_lines, comparison_summary, comparison_table, markdown_comparison  # noqa: F401
from cudalab.report.core import *  # noqa: F401,F403
from cudalab.report.core import (  # noqa: F401
    LEGEND, NCU_COLUMNS, _fmt, _ms, atomic_write, console, header_lines, markdown_record, markdown_table, pct_column,
    print_point, results_table, saved_lines, simple_table, write_csv, write_json,
)
from cudalab.report.tools import *  # noqa: F401,F403
