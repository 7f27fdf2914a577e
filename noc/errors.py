"""The one exception the noc package raises for bad input."""


class NocError(ValueError):
    """A network description cannot be used; the message names the field and what is allowed."""
