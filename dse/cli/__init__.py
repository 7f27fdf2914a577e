"""The ``dse`` command. Each subcommand lives in its own module and registers itself on `cli`.

Bad input of any kind ends with one line ``error: <key>: <what is wrong>`` on stderr and exit status 2,
click's own usage errors (an unknown option, a bad choice) included.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from ..errors import StudyError
from .common import USER_ERRORS, cli, fail

# every ``*_cmd`` module in this folder registers its subcommand on `cli` when imported
for _module in pkgutil.iter_modules(__path__):
    if _module.name.endswith("_cmd"):
        importlib.import_module(f"{__name__}.{_module.name}")


_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())     # click >= 8.2


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI and turn bad input into exit status 2."""
    try:
        cli.main(args=argv, prog_name="dse", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted; results already written are left as they were", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("interrupted; results already written are left as they were", err=True)
        sys.exit(130)
    except _NO_ARGS as exc:                 # plain ``dse``: the help, as click prints it
        exc.show()
        sys.exit(2)
    except click.UsageError as exc:         # click's usage block is several lines: one, naming the command
        command = exc.ctx.command_path if exc.ctx is not None else "dse"
        fail(f"{exc.format_message()} ({command} -h for help)")
    except click.ClickException as exc:
        fail(exc.format_message())
    except StudyError as exc:
        fail(str(exc))
    except USER_ERRORS as exc:
        fail(str(exc))


__all__ = ["cli", "main"]
