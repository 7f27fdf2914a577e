"""Shared pieces of the CLI: the command group and the error exit."""
from __future__ import annotations

import math
import sys

import click

from arch import ArchError
from memory import MemorySpecError
from noc import NocError
from workloads import WorkloadError

from ..errors import StudyError

#: errors that mean "the user's input is wrong": reported in one line, exit status 2
USER_ERRORS = (StudyError, WorkloadError, ArchError, MemorySpecError, NocError)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="chiplet-dse")
def cli() -> None:
    """Design-space exploration of heterogeneous chiplet packages for LLM inference."""


def fail(message: str) -> None:
    """Print ``error: <message>`` as one line on stderr and exit with status 2."""
    click.echo(f"error: {' '.join(str(message).split())}", err=True)
    sys.exit(2)


class FiniteFloat(click.ParamType):
    """A finite number (``inf`` and ``nan``, which click's FLOAT takes, are refused), optionally above
    ``minimum`` (excluded when ``open_min``)."""

    name = "number"

    def __init__(self, minimum: float | None = None, open_min: bool = False):
        self.minimum, self.open_min = minimum, open_min

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.minimum is not None and (number < self.minimum or (self.open_min and number == self.minimum)):
            self.fail(f"{value!r} must be {'>' if self.open_min else '>='} {self.minimum:g}", param, ctx)
        return number
