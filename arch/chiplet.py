"""A compute chiplet: what kind it is, its array, SRAM, clock and technology node."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ArchError
from .technology import node as tech_node

DATAFLOWS = ("os", "ws", "is")
KINDS = ("systolic",)


@dataclass(frozen=True)
class Chiplet:
    """One compute-chiplet design. SI units: bytes, hertz."""

    name: str
    kind: str
    rows: int
    cols: int
    dataflow: str
    sram_bytes: float
    freq_hz: float
    node: str
    vector_lanes: int = 0          # elementwise unit width; 0 means one lane per array column
    d2d_phys: int = 4              # die-to-die PHYs (one per mesh direction)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ArchError(f"chiplet {self.name!r}: unknown kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        if self.dataflow not in DATAFLOWS:
            raise ArchError(f"chiplet {self.name!r}: unknown dataflow {self.dataflow!r}; "
                            f"allowed: {', '.join(DATAFLOWS)}")
        if self.rows < 1 or self.cols < 1:
            raise ArchError(f"chiplet {self.name!r}: array must be at least 1 x 1, got {self.rows} x {self.cols}")
        if self.sram_bytes <= 0 or self.freq_hz <= 0:
            raise ArchError(f"chiplet {self.name!r}: SRAM size and clock must be positive")
        tech_node(self.node)   # validates the node name

    @property
    def lanes(self) -> int:
        return self.vector_lanes or self.cols

    def peak_flops(self) -> float:
        """Peak matrix throughput: 2 FLOPs per MAC per PE per cycle."""
        return 2.0 * self.rows * self.cols * self.freq_hz
