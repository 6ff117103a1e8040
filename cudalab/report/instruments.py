"""Views instruments leave in saved rows: one contract, so ``report`` renders a record without knowing
which instrument made it.

An instrument (ncu's source view and advice today) stores plain JSON in each row's ``extra`` under keys
it owns, and registers a :class:`View`: the keys that mark its data, and a function that turns a point's
rows into text lines printed under the table. :func:`cudalab.report.print_point` prints every view whose
keys appear in the point's rows; a record without them prints nothing more. A view's module imports
nothing of its instrument (it reads dicts), so ``report`` works where the instrument is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

#: (rows of one point, terminal width) -> lines
Render = Callable[[Sequence[Any], int], list[str]]


@dataclass(frozen=True)
class View:
    """One instrument's view of saved rows: the ``extra`` keys it owns and how it renders them."""

    name: str
    keys: tuple[str, ...]
    render: Render


VIEWS: dict[str, View] = {}


def register(view: View) -> View:
    """Add (or replace) a view; returns it."""
    VIEWS[view.name] = view
    return view


def views_of(results: Sequence[Any]) -> list[View]:
    """The registered views whose keys appear in some row's ``extra``."""
    present = {k for r in results for k in (getattr(r, "extra", None) or {})}
    return [v for v in VIEWS.values() if present & set(v.keys)]


def render_views(results: Sequence[Any], width: int = 120) -> list[str]:
    """Every present view's lines, in registration order."""
    out: list[str] = []
    for v in views_of(results):
        out.extend(v.render(results, width))
    return out


def print_views(con: Any, results: Sequence[Any]) -> None:
    """Print :func:`render_views` on a rich console, under a point's table."""
    if not views_of(results):  # most points: no view, and no need to ask the console its width
        return
    text = render_views(results, max(getattr(con, "width", 120), 80))
    if text:
        con.print("\n".join(text), markup=False, highlight=False, soft_wrap=True)
