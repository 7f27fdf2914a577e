"""Package network: link technologies, 2D mesh with XY routing, link loads, latency and energy."""
from .errors import NocError
from .links import LinkTech, link_kinds, link_tech
from .mesh import add_xy_route_load, average_hops_uniform, bisection_links, md1_wait, xy_hops, xy_link_loads

__all__ = ["NocError", "LinkTech", "link_kinds", "link_tech", "xy_hops", "add_xy_route_load", "xy_link_loads",
           "md1_wait", "average_hops_uniform", "bisection_links"]
