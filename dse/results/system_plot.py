"""The picture of a system design: its nodes, the packages in each (coloured by pipeline stage, labelled
with stage and expert rank), the fabric inside a node and the network between nodes, with what the
step spends on each level (dse.system)."""
from __future__ import annotations

import math

import pandas as pd
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from ..study.space import Design
from ..system.layout import Layout
from .plots import KIND_COLOURS, Figure

MAX_DRAWN_NODES = 32          # larger systems draw the first nodes and say how many more there are


def plot_system(design: Design, prepared, metrics: pd.Series | None = None, title: str = "") -> Figure:
    """Nodes as boxes of packages; a package's colour is its pipeline stage, its label ``stage.rank`` (and the
    replica when there are several); arrows run along the pipeline."""
    hw = prepared.system_evaluator.hardware
    layout = Layout(**{k: int(v) for k, v in (design.system or {}).items()})
    per_node = hw.packages_per_node
    nodes = layout.nodes(per_node)
    drawn = min(nodes, MAX_DRAWN_NODES)
    node_cols = min(drawn, 4)
    node_rows = math.ceil(drawn / node_cols)
    pkg_cols = min(per_node, 4)
    pkg_rows = math.ceil(per_node / pkg_cols)
    size, gap, pad = 1.0, 0.25, 0.35
    node_w = pkg_cols * (size + gap) - gap + 2 * pad
    node_h = pkg_rows * (size + gap) - gap + 2 * pad + 0.35
    node_gap = 0.6
    fig = Figure(figsize=(max(6.0, 0.8 * node_cols * node_w), 0.8 * node_rows * node_h + 2.4), layout="constrained")
    ax = fig.add_subplot()
    centre = {}
    for node in range(drawn):
        nr, nc = divmod(node, node_cols)
        x0, y0 = nc * (node_w + node_gap), -nr * (node_h + node_gap)
        ax.add_patch(FancyBboxPatch((x0, y0), node_w, node_h, boxstyle="round,pad=0.02,rounding_size=0.15",
                                    fc="#f4f4f4", ec="#555555", lw=1.2))
        ax.text(x0 + pad, y0 + node_h - 0.12, f"node {node}", ha="left", va="top", fontsize=8, weight="bold")
        for slot in range(per_node):
            g = node * per_node + slot
            if g >= layout.packages:
                continue
            replica, rest = divmod(g, layout.per_replica)
            stage, rank = divmod(rest, layout.experts)
            pr, pc = divmod(slot, pkg_cols)
            px, py = x0 + pad + pc * (size + gap), y0 + node_h - 0.45 - pad - (pr + 1) * size - pr * gap
            ax.add_patch(Rectangle((px, py), size, size, fc=KIND_COLOURS[stage % len(KIND_COLOURS)], ec="black",
                                   lw=0.8))
            label = f"{stage}.{rank}" + (f"\nr{replica}" if layout.replicas > 1 else "")
            ax.text(px + size / 2, py + size / 2, label, ha="center", va="center", fontsize=7)
            centre[(replica, stage, rank)] = (px + size / 2, py + size / 2)
    for replica in range(layout.replicas):          # the pipeline: one arrow from each stage to the next
        for stage in range(layout.pipeline - 1):
            a = [centre[k] for k in centre if k[0] == replica and k[1] == stage]
            b = [centre[k] for k in centre if k[0] == replica and k[1] == stage + 1]
            if a and b:
                start = (sum(x for x, _ in a) / len(a), sum(y for _, y in a) / len(a))
                end = (sum(x for x, _ in b) / len(b), sum(y for _, y in b) / len(b))
                ax.add_patch(FancyArrowPatch(start, end, connectionstyle="arc3,rad=0.25", lw=2.2, alpha=0.75,
                                             color="#222222", arrowstyle="-|>,head_width=5,head_length=8",
                                             zorder=4))
    stages = min(layout.pipeline, len(KIND_COLOURS))
    ax.legend([Rectangle((0, 0), 1, 1, fc=KIND_COLOURS[p], ec="black") for p in range(stages)],
              [f"pipeline stage {p}" for p in range(stages)], loc="upper center", bbox_to_anchor=(0.5, -0.01),
              ncol=min(stages, 4), fontsize=8, frameon=False)
    fabric, network = hw.fabric_level(), hw.network_level(nodes)
    lines = [f"{layout.packages} packages in {nodes} node{'s' if nodes > 1 else ''}: {layout.pipeline} pipeline "
             f"stage(s) x {layout.experts} expert rank(s) x {layout.replicas} replica(s); label stage.rank",
             f"fabric {hw.fabric}: {fabric.bandwidth_Bps / 1e9:.4g} GB/s per package, "
             f"{fabric.alpha_s * 1e6:.3g} us per step"]
    if network is not None and nodes > 1:
        lines.append(f"network {hw.network} ({hw.network_topology}, {hw.nics_per_node} NICs per node): "
                     f"{network.bandwidth_Bps / 1e9:.4g} GB/s per package, {network.alpha_s * 1e6:.3g} us per step")
    if metrics is not None:
        lines.append(f"{float(metrics['latency_s']) * 1e3:.4g} ms per step, of which fabric "
                     f"{float(metrics['comm_fabric_s']) * 1e3:.3g} ms and network "
                     f"{float(metrics['comm_network_s']) * 1e3:.3g} ms; "
                     f"{float(metrics['throughput_tok_s']):.4g} tokens/s")
    if drawn < nodes:
        lines.append(f"(the first {drawn} of {nodes} nodes are drawn)")
    ax.set_title((f"{title}\n" if title else "") + "\n".join(lines), fontsize=8)
    ax.set_xlim(-0.2, node_cols * (node_w + node_gap))
    ax.set_ylim(-(node_rows - 1) * (node_h + node_gap) - 0.2, node_h + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig
