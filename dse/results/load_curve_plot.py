"""The load-curve figure and report section of a serving study (dse.serving.load_curve)."""
from __future__ import annotations

import pandas as pd

from .plots import Figure

TEXT = ("Time to first token and time per output token of the design as the offered load rises to its "
        "saturation rate: lines from the closed form the search used (p99 solid, mean dashed), markers from "
        "a discrete-event simulation of {requests} requests on the same steps. The dotted lines are the "
        "study's SLOs and request rate.")


def plot_load_curve(curve: pd.DataFrame, study, title: str = "") -> Figure:
    sv = study.serving
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    closed = curve[curve["source"] == "closed form"]
    sim = curve[curve["source"] == "simulation"]
    for ax, metric, slo, name in zip(fig.subplots(1, 2), ("ttft", "tpot"), (sv.slo.ttft_ms, sv.slo.tpot_ms),
                                     ("time to first token", "time per output token")):
        ax.plot(closed["request_rate"], closed[f"{metric}_p99_ms"], color="#c0392b", label="p99 (closed form)")
        ax.plot(closed["request_rate"], closed[f"{metric}_mean_ms"], color="#2c3e50", ls="--",
                label="mean (closed form)")
        ax.scatter(sim["request_rate"], sim[f"{metric}_p99_ms"], color="#c0392b", marker="o", zorder=3,
                   label="p99 (simulation)")
        ax.scatter(sim["request_rate"], sim[f"{metric}_mean_ms"], color="#2c3e50", marker="s", zorder=3,
                   label="mean (simulation)")
        ax.axhline(slo, color="#7f8c8d", ls=":", lw=1)
        ax.axvline(sv.request_rate, color="#7f8c8d", ls=":", lw=1)
        ax.set_xlabel("request rate [requests/s]")
        ax.set_ylabel(f"{name} [ms]")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def load_curve_section(curve: pd.DataFrame, figure: str, design_id: str, requests: int) -> list[str]:
    sim = curve[curve["source"] == "simulation"].round(3)
    lines = [f"## Load curve of {design_id}", "", TEXT.format(requests=f"{requests:,}"), "",
             f"![load curve]({figure})", "", "| request rate [req/s] | TTFT p99 [ms] | TPOT p99 [ms] | source |",
             "|---|---|---|---|"]
    closed = curve[curve["source"] == "closed form"]
    for frame in (closed.iloc[[3, 9, 15]], sim):
        for _, r in frame.iterrows():
            lines.append(f"| {r['request_rate']:.4g} | {r['ttft_p99_ms']:.4g} | {r['tpot_p99_ms']:.4g} | {r['source']} |")
    return lines + [""]
