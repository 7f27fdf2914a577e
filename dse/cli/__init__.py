"""The ``dse`` command. Each subcommand lives in its own module and registers itself on `cli`.

Bad input of any kind ends with one line ``error: <key>: <what is wrong>`` on stderr and exit status 2.
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
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except StudyError as exc:
        fail(str(exc))
    except USER_ERRORS as exc:
        fail(str(exc))


__all__ = ["cli", "main"]
