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
    ``minimum`` (excluded when ``open_min``) and at most ``maximum`` (``why``: the reason for the cap)."""

    name = "number"

    def __init__(self, minimum: float | None = None, open_min: bool = False, maximum: float | None = None,
                 why: str = ""):
        self.minimum, self.open_min, self.maximum, self.why = minimum, open_min, maximum, why

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.minimum is not None and (number < self.minimum or (self.open_min and number == self.minimum)):
            self.fail(f"{value!r} must be {'>' if self.open_min else '>='} {self.minimum:g}", param, ctx)
        if self.maximum is not None and number > self.maximum:
            self.fail(f"{value!r} must be at most {self.maximum:,g}{f' ({self.why})' if self.why else ''}", param, ctx)
        return number


class WholeNumber(click.ParamType):
    """A whole number from ``minimum`` to ``maximum`` (``why``: the reason for the cap); ``1e3`` and
    ``4096.0`` are taken as the whole numbers they write, ``512.5``, ``nan`` and ``inf`` refused."""

    name = "integer"

    def __init__(self, minimum: int, maximum: int, why: str = ""):
        self.minimum, self.maximum, self.why = minimum, maximum, why

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                try:
                    real = float(value)
                except (TypeError, ValueError):
                    self.fail(f"{value!r} is not a whole number", param, ctx)
                if not math.isfinite(real):
                    self.fail(f"{value!r} is not a finite number", param, ctx)
                if real != math.floor(real):
                    self.fail(f"{value!r} is not a whole number", param, ctx)
                if abs(real) > self.maximum:    # past the cap: refused below without int() of a huge float
                    real = math.copysign(self.maximum + 1, real)
                number = int(real)
        if not self.minimum <= number <= self.maximum:
            self.fail(f"{value!r} must be from {self.minimum:,} to {self.maximum:,}"
                      f"{f' ({self.why})' if self.why else ''}", param, ctx)
        return number
