"""The one exception the arch package raises for bad input."""


class ArchError(ValueError):
    """A chiplet description cannot be used; the message names the field and what is allowed."""
