"""What a study is: the study file (`Study`, validated section by section in ``schema/``) and its design
space (`Space`: the integer genes the search varies; `Design`: one package and mapping)."""
from .space import COPY_MAPPINGS, SPLIT_MAPPINGS, Design, Space, build_space, check_design
from .spec import Study, load_study

__all__ = ["Study", "load_study", "Design", "Space", "build_space", "check_design", "SPLIT_MAPPINGS",
           "COPY_MAPPINGS"]
