"""The one exception the memory package raises for bad input."""


class MemorySpecError(ValueError):
    """A memory description cannot be used; the message names the field and what is allowed."""
