"""Shared pieces of the CLI: the command group and the error exit."""
from __future__ import annotations

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
    click.echo(f"error: {message}", err=True)
    sys.exit(2)
