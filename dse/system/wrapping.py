"""An evaluator built over the system evaluator (training iterations, serving): whatever it does not
define itself (decode, designs, layouts, tables, failure reports ...) is the wrapped evaluator's."""


class EvaluatorOver:
    """Subclasses keep the evaluator they wrap in ``self.system``."""

    def __getattr__(self, name: str):
        system = self.__dict__.get("system")
        if system is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(system, name)
