"""Run BookSim2 over offered loads and write the figures as a fixture CSV (tests/data/booksim_*.csv).

BookSim2 is not part of this repository: build it yourself (github.com/booksim/booksim2, ``make`` in
src/, needs flex and bison) and pass its binary. The config file is written here from the keys below,
every other key at BookSim2's default (iq router, 1-cycle routing / VC allocation / switch allocation /
switch traversal, iSLIP allocators, Bernoulli injection, 3 warm-up periods of 1000 cycles, seed 0).
BookSim2's exit status is inverted, so its stdout is parsed; a run it aborts as unstable is a row with
``stable = 0`` and empty figures.

    python tools/booksim_sweep.py --booksim /path/to/booksim --topology mesh --k 8 \\
        --traffic transpose --rates 0.02,0.05,0.1 --out tests/data/booksim_transpose.csv [--append]
"""
from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

CONFIG = """topology = {topology};
k = {k};
n = 2;
routing_function = {routing};
num_vcs = 4;
vc_buf_size = 8;
traffic = {traffic};
packet_size = 1;
injection_rate = 0.1;
sim_type = latency;
"""
COLUMNS = "topology,k,traffic,injection_rate,packet_latency_cycles,network_latency_cycles,accepted_flit_rate," \
          "booksim_hops,stable"
FIGURES = {"packet_latency_cycles": "Packet latency average", "network_latency_cycles": "Network latency average",
           "accepted_flit_rate": "Accepted flit rate average", "booksim_hops": "Hops average"}


def overall(stdout: str, name: str) -> float | None:
    """A figure of BookSim2's "Overall Traffic Statistics" block (None when the run was unstable)."""
    block = stdout.split("====== Overall Traffic Statistics ======")
    if len(block) < 2:
        return None
    m = re.search(rf"{re.escape(name)} = ([0-9.eE+-]+)", block[1])
    return float(m.group(1)) if m else None


def run(booksim: str, topology: str, k: int, traffic: str, rate: float, timeout_s: float) -> str:
    routing = "dor" if topology == "mesh" else "dim_order"
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / f"{topology}.cfg"
        cfg.write_text(CONFIG.format(topology=topology, k=k, routing=routing, traffic=traffic))
        try:
            done = subprocess.run([booksim, str(cfg), f"injection_rate={rate}"], capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return ""
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--booksim", required=True)
    ap.add_argument("--topology", choices=["mesh", "torus"], required=True)
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--traffic", default="uniform")
    ap.add_argument("--rates", required=True, help="comma-separated offered loads, flits/cycle/node")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run (a run past it is unstable)")
    a = ap.parse_args()
    rows = []
    for rate in (float(r) for r in a.rates.split(",")):
        out = run(a.booksim, a.topology, a.k, a.traffic, rate, a.timeout)
        values = [overall(out, FIGURES[c]) for c in FIGURES]
        stable = all(v is not None for v in values)
        cells = [f"{v:g}" if v is not None and stable else "" for v in values]
        rows.append(",".join([a.topology, str(a.k), a.traffic, f"{rate:g}", *cells, str(int(stable))]))
        print(rows[-1], flush=True)
    mode = "a" if a.append and a.out.exists() else "w"
    with a.out.open(mode) as f:
        if mode == "w":
            f.write(COLUMNS + "\n")
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
