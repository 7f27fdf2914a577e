"""`StudyError`: bad input, reported as the YAML key at fault, what was wrong and what is allowed."""
from __future__ import annotations


class StudyError(ValueError):
    """A study cannot be used as written. ``key`` is the dotted YAML path (``hardware.chiplets[0].array``)."""

    def __init__(self, message: str, key: str | None = None, source: str | None = None):
        self.key, self.source, self.detail = key, source, message
        where = f"{source}: " if source else ""
        at = f"{key}: " if key else ""
        super().__init__(f"{where}{at}{message}")
