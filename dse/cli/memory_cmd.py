"""``dse memory``: what a memory preset gives and costs (bandwidth, capacity, latency, energy)."""
from __future__ import annotations

import json
import math

import click

import memory

from ..study.schema.limits import DDR_CHANNELS, HBM_STACKS
from .common import cli
from .output import compiles, fit

#: utilisations at which the loaded (M/D/1) latency is reported
UTILISATIONS = (0.5, 0.8, 0.95)


def _parse_overrides(pairs: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise memory.MemorySpecError(f"--set expects KEY=VALUE, got {pair!r}")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise memory.MemorySpecError(f"--set {key.strip()}: {value!r} is not a number") from None
        if not math.isfinite(out[key.strip()]):
            raise memory.MemorySpecError(f"--set {key.strip()}: {value!r} is not a finite number")
    return out


def memory_report(kind: str, count: int, overrides: dict | None = None) -> dict:
    """Every figure ``dse memory`` prints, in SI units (bytes, seconds, joules, B/s)."""
    spec = memory.memory_preset(kind, overrides)
    stream_hit = memory.row_hit_rate(spec, memory.STREAM)
    scattered_hit = memory.row_hit_rate(spec, memory.SCATTERED_BYTES)

    def pattern(hit: float) -> dict:
        bw = memory.effective_bandwidth_Bps(spec, count, hit)
        return {"row_hit_rate": hit, "efficiency": memory.efficiency(spec, hit), "bandwidth_Bps": bw,
                "bound": memory.bandwidth_bound(spec, hit),
                "latency_s": memory.access_latency_s(spec, hit),
                "loaded_latency_s": {str(u): memory.access_latency_s(spec, hit, u) for u in UTILISATIONS}}

    stream = pattern(stream_hit)
    return {
        "kind": kind, "unit": spec.unit, "count": count, "overrides": dict(overrides or {}),
        "peak_bandwidth_Bps": count * spec.peak_bandwidth_Bps,
        "capacity_bytes": count * spec.capacity_bytes,
        "streaming": stream,
        "scattered_64B": pattern(scattered_hit),
        "row_hit_latency_s": memory.access_latency_s(spec, 1.0),
        "row_miss_latency_s": memory.access_latency_s(spec, 0.0),
        "energy_j_per_byte": spec.energy_j_per_byte,
        "streaming_power_w": stream["bandwidth_Bps"] * spec.energy_j_per_byte,
        "phy_area_mm2": count * spec.phy_area_mm2,
        "footprint_mm2": count * spec.footprint_mm2,
        "cost_usd": count * spec.capacity_bytes * spec.cost_usd_per_byte,
        "organisation": {"channels": spec.channels * count, "bus_width_bits": spec.bus_width_bits * count,
                         "data_rate_bps": spec.data_rate_bps, "burst_bytes": spec.burst_bytes,
                         "row_bytes": spec.row_bytes, "banks_per_channel": spec.banks, "bank_groups": spec.bank_groups,
                         "ranks": spec.ranks},
        "timing_s": {"tCL": spec.tCL_s, "tRCD": spec.tRCD_s, "tRP": spec.tRP_s, "tRAS": spec.tRAS_s, "tRC": spec.tRC_s,
                     "tRRD": spec.tRRD_s, "tFAW": spec.tFAW_s, "tBL": spec.tBL_s, "tCS": spec.tCS_s,
                     "tRFC": spec.tRFC_s, "tREFI": spec.tREFI_s},
    }


def _ns(seconds: float) -> str:
    return "saturated" if seconds == float("inf") else f"{seconds * 1e9:.1f} ns"


def _text(r: dict) -> list[str]:
    units = f"{r['count']} {r['unit']}{'s' if r['count'] != 1 else ''}"
    s, x, o, t = r["streaming"], r["scattered_64B"], r["organisation"], r["timing_s"]
    loaded = ", ".join(f"{_ns(v)} at {float(u):.0%}" for u, v in s["loaded_latency_s"].items())
    lines = [
        f"{r['kind']} x {units}" + (f"  (overrides: {r['overrides']})" if r["overrides"] else ""),
        f"  peak bandwidth        {r['peak_bandwidth_Bps'] / 1e9:10.1f} GB/s",
        f"  streaming             {s['bandwidth_Bps'] / 1e9:10.1f} GB/s  ({s['efficiency']:.0%} of peak, "
        f"row hits {s['row_hit_rate']:.1%})",
        f"  scattered 64 B        {x['bandwidth_Bps'] / 1e9:10.1f} GB/s  ({x['efficiency']:.0%} of peak, "
        f"row hits {x['row_hit_rate']:.1%})",
        f"  bound                 {s['bound']} (streaming) / {x['bound']} (scattered)",
        f"  capacity              {r['capacity_bytes'] / memory.GIB:10.1f} GiB",
        f"  latency row hit/miss  {_ns(r['row_hit_latency_s']):>10} / {_ns(r['row_miss_latency_s'])}",
        f"  latency streaming     {_ns(s['latency_s']):>10}  loaded: {loaded}",
        f"  latency scattered     {_ns(x['latency_s']):>10}",
        f"  energy                {r['energy_j_per_byte'] / 8 * 1e12:10.2f} pJ/bit  "
        f"({r['streaming_power_w']:.1f} W streaming)",
        f"  PHY area / footprint  {r['phy_area_mm2']:10.1f} mm2 / {r['footprint_mm2']:.1f} mm2",
        f"  cost                  {r['cost_usd']:10.0f} USD",
        f"  organisation          {o['channels']} channels x {o['bus_width_bits'] // o['channels']} bits at "
        f"{o['data_rate_bps'] / 1e9:g} Gb/s, {o['burst_bytes']} B bursts, {o['row_bytes']} B rows, "
        f"{o['banks_per_channel']} banks / channel, {o['ranks']} rank(s)",
        "  timing (ns)           " + "  ".join(f"{k} {v * 1e9:.2f}" for k, v in t.items()),
    ]
    return lines


@cli.command("memory")
@click.argument("kind", required=False)
@click.option("--stacks", type=click.IntRange(1, HBM_STACKS.limit), help="number of HBM stacks")
@click.option("--channels", type=click.IntRange(1, DDR_CHANNELS.limit), help="number of DDR / LPDDR channels")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="override a preset number (data-file units), e.g. --set capacity_gib=24")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON in SI units")
@compiles("memory")
def memory_cmd(kind: str | None, stacks: int | None, channels: int | None, overrides: tuple[str, ...],
               as_json: bool) -> None:
    """Bandwidth (peak, streaming, scattered), capacity, latency and energy of a memory preset.

    Without KIND, list the presets.
    """
    if kind is None:
        rows = [memory_report(k, 1) for k in memory.memory_kinds()]
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return
        click.echo(f"{'kind':<9}{'unit':<9}{'peak GB/s':>10}{'stream GB/s':>13}{'GiB':>6}{'pJ/bit':>8}")
        for r in rows:
            click.echo(f"{r['kind']:<9}{r['unit']:<9}{r['peak_bandwidth_Bps'] / 1e9:>10.1f}"
                       f"{r['streaming']['bandwidth_Bps'] / 1e9:>13.1f}{r['capacity_bytes'] / memory.GIB:>6.0f}"
                       f"{r['energy_j_per_byte'] / 8 * 1e12:>8.1f}")
        return
    spec = memory.memory_preset(kind)
    want, given, other = ("stacks", stacks, channels) if spec.is_hbm else ("channels", channels, stacks)
    if other is not None:
        raise memory.MemorySpecError(f"{kind} is counted in {want}, not {'channels' if spec.is_hbm else 'stacks'}")
    report = memory_report(kind, given or 1, _parse_overrides(overrides))
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo("\n".join(part for line in _text(report) for part in fit(line, 24)))
