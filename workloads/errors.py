"""The one exception the workload package raises for bad input."""


class WorkloadError(ValueError):
    """A workload description (preset name, config file, routing) cannot be used; the message says why."""
