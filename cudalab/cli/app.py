"""The click group: one command per module of this package, one per kernel family (made from the
catalog), and the one place where cudalab's errors become a message and an exit code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

import click

from cudalab import __version__, catalog
from cudalab.cli.options import CONTEXT  # noqa: F401  (re-exported: every command's context settings)
from cudalab.errors import CatalogError, CudalabError
from cudalab.textcells import clean, wrapped

if TYPE_CHECKING:
    from cudalab.families import Family


def echo_folded(text: str, width: int, err: bool = False) -> None:
    """One line of a command's closing text, folded at words to ``width`` columns (a number is never split; the
    lines after the first indented two spaces)."""
    for i, line in enumerate(wrapped(text, max(40, width - 2))):
        click.echo(("  " if i else "") + line, err=err)


def family_names() -> list[str]:
    """Every family folder's name, broken ones too (their commands say why), except a folder refused for
    its name (``list``, ``-h``: 'cudalab list' names it); none when the kernel folder itself is unusable
    (then every family command says that)."""
    from cudalab.catalog.discovery import name_problem  # noqa: PLC0415

    try:
        cat = catalog.load_catalog()
    except CudalabError:
        return []
    return sorted({*cat, *(b.name for b in cat.broken if not name_problem(b.name))})


def family_subcommand(name: str, make: Callable[[catalog.FamilySpec, Family], click.Command]) -> click.Command | None:
    """The command ``make`` builds for family ``name`` from its spec and its loaded module (its options); for a
    broken family or an unusable kernel folder, a command that says so in one line (exit 2); None for a name that
    is no family."""
    try:
        cat = catalog.load_catalog()
    except CudalabError as exc:  # 'cudalab transpose' with a bad CUDALAB_SRC says what is wrong with it
        return _unusable(name, exc)
    if name in cat:
        from cudalab.families import load  # noqa: PLC0415  (the family's module: only for its own command)

        try:
            return make(cat[name], load(cat[name].module))
        except CudalabError as exc:  # its module is broken (no FAMILY): the command says so, help still works
            return _unusable(name, exc)
    reason = cat.broken_reason(name)
    return _unusable(name, CatalogError(f"broken family {name}: {reason}")) if reason else None


def family_summary(name: str) -> click.Command | None:
    """What a help listing shows for family ``name``: a stand-in command with its family.toml description
    (or why it is broken), so that listing the families imports none of their modules (nor NumPy)."""
    try:
        cat = catalog.load_catalog()
    except CudalabError as exc:
        return _unusable(name, exc)
    if name in cat:
        return click.Command(name, short_help=clean(cat[name].description))
    reason = cat.broken_reason(name)
    return _unusable(name, CatalogError(f"broken family {name}: {reason}")) if reason else None


#: ``ctx.meta`` key set while a group's help lists its commands.
LISTING = "cudalab.listing"


class FamilyListing:
    """Mixed into a group whose commands include the families: its help lists them by
    :func:`family_summary` instead of building each one's command (``cudalab --help`` stays fast)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        ctx.meta[LISTING] = True
        try:
            super().format_commands(ctx, formatter)  # type: ignore[misc]
        finally:
            ctx.meta.pop(LISTING, None)


def _unusable(name: str, error: CudalabError) -> click.Command:
    """A command that only reports ``error`` (one line, exit 2), whatever its arguments."""

    def fail(**_: Any) -> None:
        raise error

    return click.Command(name, callback=fail, add_help_option=False, short_help=str(error),
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


class CudalabGroup(FamilyListing, click.Group):
    """A group whose subcommands include one per kernel family, and which turns cudalab's errors
    into one message and an exit code (a traceback only with ``--debug``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        fixed = super().list_commands(ctx)
        return fixed + [n for n in family_names() if n not in fixed]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        if ctx.meta.get(LISTING):
            return family_summary(name)
        from cudalab.cli.family import family_command  # noqa: PLC0415

        return family_subcommand(name, family_command)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CudalabError as exc:
            if ctx.meta.get("cudalab.debug"):
                raise
            click.echo(f"cudalab: {clean(str(exc))}", err=True)  # one line, whatever the error quotes
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:  # a command that keeps what it measured says so itself; here nothing was kept
            if ctx.meta.get("cudalab.debug"):
                raise
            click.echo("cudalab: interrupted", err=True)  # one line and 130, as a shell reports Ctrl-C
            ctx.exit(130)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Run as click does, the catalog read once for the whole command (:func:`cudalab.catalog.held`)."""
        with catalog.held():
            return self._main(*args, standalone_mode=standalone_mode, **kwargs)

    def _main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """A usage error is one line (``cudalab: ...``, exit 2), as every other refusal: click's own form
        is three (usage, hint, error)."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare 'cudalab': the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"cudalab: {clean(usage_line(exc))}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            if isinstance(exc.__context__, KeyboardInterrupt):  # Ctrl-C before the command could keep anything
                click.echo("cudalab: interrupted", err=True)
                sys.exit(130)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def _family_paths(folders: tuple[str, ...]) -> None:
    """``--family-path``: first on ``CUDALAB_PATH``, for this process and its workers and tool children.
    Set while parsing (eager), so the family command it names resolves."""
    if folders:
        from cudalab.catalog import discovery  # noqa: PLC0415

        discovery.add_paths(folders)


def usage_line(exc: click.ClickException) -> str:
    """A click error as one line: its message, and where the options are listed."""
    text = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        text += f" (see '{ctx.command_path} --help')"
    return text


@click.group(cls=CudalabGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="cudalab")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option("--family-path", "family_paths", multiple=True, metavar="DIR", is_eager=True, expose_value=False,
              callback=lambda ctx, param, value: _family_paths(value),
              help="A folder of your own families (DIR/<family>/family.toml + module + kernels); repeatable; "
                   "also CUDALAB_PATH.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """cudalab: compile, launch, verify and time CUDA kernel variants side by side.

    \b
    Examples:
      cudalab list
      cudalab transpose --variant bankopt --n 16384
      cudalab reduce --all
      cudalab compile transpose
    """
    ctx.meta["cudalab.debug"] = debug
