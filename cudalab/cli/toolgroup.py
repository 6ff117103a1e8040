"""Click groups for tools over a family (``cudalab ncu FAMILY``, ``cudalab sanitize FAMILY``): one subcommand
per catalog family, each with the family command's own problem options (:func:`options.problem_options`)
plus the tool's options."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import click

from cudalab.catalog import FamilySpec
from cudalab.cli.app import CONTEXT, LISTING, FamilyListing, family_names, family_subcommand, family_summary
from cudalab.cli.options import problem_options
from cudalab.textcells import clean

if TYPE_CHECKING:
    from cudalab.families import Family

#: (spec, family, the command's keyword arguments) -> None
Handler = Callable[[FamilySpec, "Family", dict[str, Any]], None]


class FamilyToolGroup(FamilyListing, click.Group):
    """A group whose subcommands are the catalog's families, built on demand like ``CudalabGroup``'s."""

    def __init__(self, *args: Any, tool_params: Callable[[], list[click.Parameter]], handler: Handler,
                 summary: str, **kw: Any):
        super().__init__(*args, **kw)
        self.tool_params = tool_params
        self.handler = handler
        self.summary = summary

    def list_commands(self, ctx: click.Context) -> list[str]:
        return family_names()

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if ctx.meta.get(LISTING):
            return family_summary(name)
        return family_subcommand(name, self._command)

    def _command(self, spec: FamilySpec, fam: Family) -> click.Command:
        handler = self.handler

        def callback(**kw: Any) -> None:
            handler(spec, fam, kw)

        return click.Command(spec.name, callback=callback, params=problem_options(spec, fam) + self.tool_params(),
                             context_settings=CONTEXT, help=f"{self.summary} {spec.name}: {clean(spec.description)}.",
                             short_help=clean(spec.description))

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if self.get_command(ctx, name) is None and not name.startswith("-"):
            known = ", ".join(self.list_commands(ctx))
            raise click.UsageError(f"no family {name!r}; families: {known}", ctx)
        return super().resolve_command(ctx, args)
