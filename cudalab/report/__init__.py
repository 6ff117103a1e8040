"""Rich tables, markdown, JSON and CSV: the only place that imports rich (its :mod:`~cudalab.report.progress`: the bar on stderr).

:mod:`~cudalab.report.core`: run tables and headers (printed on :mod:`~cudalab.report.console`); :mod:`~cudalab.report.compare`: saved-run
comparisons; :mod:`~cudalab.report.tooltables`: instruments' own tables (``cudalab ncu``) and compute-sanitizer tables.
Instruments reach the tables through one contract and are never imported here: their columns and legend
come with the point (:mod:`cudalab.instruments`), their views from :mod:`~cudalab.report.instruments`.
"""

from cudalab.report.compare import *  # noqa: F401,F403
from cudalab.report.compare import comparison_lines, comparison_summary, comparison_table, markdown_comparison  # noqa: F401
from cudalab.report.core import *  # noqa: F401,F403
from cudalab.report.core import (
    _fmt,
    _ms,
    atomic_write,
    console,
    header_lines,
    markdown_record,
    markdown_table,
    pct_column,
    print_long,
    print_point,
    results_table,
    saved_lines,
    simple_table,
    write_csv,
    write_json,
)
from cudalab.report.tooltables import *  # noqa: F401,F403
from cudalab.report.instruments import View, print_views, register, render_views  # noqa: F401
from cudalab.report.source import render_source, saved_view  # noqa: F401  (registers the ncu source view)
from cudalab.report.saved import POINTS_LAYOUT_MAX, print_record  # noqa: F401

