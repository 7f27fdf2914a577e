"""``dse train``: iteration time, throughput, MFU and memory of training a model on a system (dse.training)."""
from __future__ import annotations

import json
import math

import click

import workloads

from ..errors import StudyError
from ..training import Strategy, check, iteration, layer_costs, load_system
from ..training.resilience import nodes_of, plan, resilience_from
from ..study.schema.carbon import CarbonSpec
from ..training.footprint import to_train
from ..training.search import fastest
from ..training.stacks import DEFAULT, load_stack, stack_names
from .common import cli
from .output import compiles, number, print_pairs

MAX_TOKENS = 1e16
MAX_DEVICES = 131_072        # above the largest GPU clusters built (about 100,000 GPUs); keeps --search's divisor scan short
PRECISIONS = ("bf16", "fp16", "fp8")
#: lam R above which a restart's mean wall time (e^(lam R) - 1) / lam overflows (e^700 ~ 1e304)
RESTART_EXPONENT = 700.0


@cli.command("train")
@click.argument("model")
@click.option("--system", "system_name", required=True, help="system preset (dgx-a100-80gb, dgx-h100-80gb) or YAML")
@click.option("--stack", default=DEFAULT, show_default=True,
              help=f"training software: {' | '.join(stack_names())} (dse/training/stacks.py)")
@click.option("--attention", help="fused (FlashAttention: no scores kept) | unfused; default: the stack's")
@click.option("--devices", type=int, required=True, help="devices (GPUs) in all")
@click.option("--tp", type=int, help="tensor-parallel degree")
@click.option("--pp", type=int, help="pipeline-parallel degree")
@click.option("--pp-layers", help="layers per pipeline stage: first,last or one count per stage "
              "(default: even, or balanced when --pp does not divide the layers)")
@click.option("--dp", type=int, help="data-parallel degree")
@click.option("--ep", type=int, default=1, show_default=True, help="expert-parallel degree (MoE)")
@click.option("--global-batch", type=int, required=True, help="sequences per iteration")
@click.option("--micro-batch", type=int, default=1, show_default=True, help="sequences per micro-batch")
@click.option("--seq", type=int, required=True, help="sequence length")
@click.option("--interleave", type=int, default=1, show_default=True, help="model chunks per pipeline stage")
@click.option("--recompute", default="none", show_default=True, help="none | selective | full")
@click.option("--sequence-parallel", is_flag=True, help="shard norms and dropout over the tp devices")
@click.option("--zero", type=int, default=0, show_default=True, help="ZeRO stage 0-3")
@click.option("--overlap-grad-reduce", is_flag=True, help="reduce gradients behind the last backward (Megatron-LM)")
@click.option("--precision", default="bf16", show_default=True, help="bf16 | fp16 | fp8")
@click.option("--tokens", type=float, help="training tokens: also print the time, energy and carbon to train on them")
@click.option("--grid", default="usa", show_default=True,
              help="electricity the system runs on: a grid of ACT's table (usa, europe, coal, ...) or g CO2e/kWh")
@click.option("--failures-per-day", type=float, help="failures of the whole job per day (or --mtbf-hours; "
              "default: the system YAML's failure_rates, else none)")
@click.option("--mtbf-hours", type=float, help="mean time between failures of the whole job, hours")
@click.option("--checkpoint-every", help="auto (Daly's interval) | minutes of training between checkpoints")
@click.option("--storage", help="where checkpoints go: a memory.storage tier (tectonic, local-nvme, ...)")
@click.option("--restart-minutes", type=float, help="fixed part of a restart: rescheduling, init, warm-up [10]")
@click.option("--async-checkpoint", is_flag=True, help="snapshot to host memory, drain to storage behind compute")
@click.option("--search", "search_", is_flag=True, help="find the fastest tp, pp, dp, micro-batch that fit")
@click.option("--json", "as_json", is_flag=True)
@compiles("train")
def train_cmd(model, system_name, stack, attention, devices, tp, pp, pp_layers, dp, ep, global_batch, micro_batch,
              seq, interleave, recompute, sequence_parallel, zero, overlap_grad_reduce, precision, tokens, grid, failures_per_day, mtbf_hours,
              checkpoint_every, storage, restart_minutes, async_checkpoint, search_, as_json):
    """Time, tokens/s, model FLOP/s per device (Megatron-LM's count), MFU and memory per device of one
    training iteration of MODEL (a preset or a config.json) on SYSTEM; with failures, checkpoints and
    restarts (dse.training.resilience) the effective training time and goodput."""
    cfg = workloads.load_model(model)
    software = load_stack(stack)
    system = load_system(system_name, stack=stack)
    if not 1 <= devices <= MAX_DEVICES:
        raise StudyError(f"must be a whole number from 1 to {MAX_DEVICES:,}, got {devices}", key="--devices")
    if tokens is not None and not 0 < tokens <= MAX_TOKENS:
        raise StudyError(f"must be a number of tokens in (0, {MAX_TOKENS:.0e}]", key="--tokens")
    carbon = CarbonSpec(grid=_grid(grid))
    if precision not in PRECISIONS:
        raise StudyError(f"unknown precision {precision!r}; allowed: {', '.join(PRECISIONS)}", key="--precision")
    base = dict(ep=ep, recompute=recompute, sequence_parallel=sequence_parallel, zero=zero, precision=precision,
                overlap_grad_reduce=overlap_grad_reduce, attention=attention or software.attention)
    if search_:
        if pp_layers is not None:
            raise StudyError("--search chooses the split; leave --pp-layers out", key="--pp-layers")
        strategy, it, tried = fastest(cfg, system, devices, global_batch, seq, base)
    else:
        missing = [f for f, v in (("--tp", tp), ("--pp", pp), ("--dp", dp)) if v is None]
        if missing:
            raise StudyError("give --tp, --pp and --dp, or --search to find them", key=missing[0])
        strategy = Strategy(tp=tp, pp=pp, dp=dp, micro_batch=micro_batch, global_batch=global_batch, seq=seq,
                            interleave=interleave, pp_layers=_pp_layers(pp_layers), **base)
        check(strategy, cfg.layers, cfg.heads, cfg.ffn_width, cfg.experts, devices, cfg.kv_heads)
        it, tried = iteration(cfg, system, strategy), 1
    wanted = (failures_per_day, mtbf_hours, checkpoint_every, storage, restart_minutes)
    nodes = nodes_of(strategy, system)
    res = resilience_from(failures_per_day, mtbf_hours, checkpoint_every, storage, restart_minutes, async_checkpoint,
                          system.failure_rates, strategy.devices, nodes)
    _check_acting(res, storage, async_checkpoint)
    active = res.active or async_checkpoint or any(v is not None for v in wanted)
    out = {"model": cfg.name, "system": system.name, "stack": software.name, "attention": strategy.attention,
           "devices": devices, "tp": strategy.tp, "pp": strategy.pp,
           "dp": strategy.dp, "ep": strategy.ep, "micro_batch": strategy.micro_batch,
           "interleave": strategy.interleave, "pp_layers": list(it.stage_layers), **it.as_dict(),
           "strategies_tried": tried}
    job = None
    if active:
        costs = layer_costs(cfg, system, strategy)
        job = plan(res, it.iteration_s, costs.dense_params + costs.expert_params, strategy, system)
        _check_restarts(job, failures_per_day, mtbf_hours)
        out.update(job.as_dict(it.tokens_per_s))
    if tokens is not None:
        fracs = (job.effective_training_frac, job.compute_frac) if job else (1.0, 1.0)
        out.update(to_train(it, strategy, system, tokens, carbon, *fracs))
    if as_json:
        click.echo(json.dumps(out, default=float))
        return
    rows = []
    for key, value in out.items():
        if key in ("breakdown", "energy_breakdown"):
            unit, whole = ("s", it.iteration_s) if key == "breakdown" else ("J", it.energy_j)
            rows += [(f"  {part}", f"{number(part_value)} {unit} ({part_value / whole:.1%})")
                     for part, part_value in value.items()]
        elif key == "pp_layers":
            rows.append((key, _runs(value)))
        else:
            rows.append((key, value))
    print_pairs(rows, title=f"{cfg.name} on {devices} x {system.chiplet.name} ({system.name})")


def _check_acting(res, storage, async_checkpoint) -> None:
    """Refuse --storage and --async-checkpoint where no checkpoint is taken (no failure rate, and the
    interval auto: Daly's optimum is then infinite), rather than ignore them."""
    if res.failures_per_s > 0 or res.checkpoint_every_s is not None:
        return
    for flag, given in (("--storage", storage is not None), ("--async-checkpoint", async_checkpoint)):
        if given:
            raise StudyError("no checkpoint is taken without a failure rate (--failures-per-day, --mtbf-hours or "
                             "the system's failure_rates) or --checkpoint-every MINUTES; give one", key=flag)


def _check_restarts(job, failures_per_day, mtbf_hours) -> None:
    """Refuse a failure rate under which no restart ever finishes: each restart of R s starts again at every
    failure, (e^(lam R) - 1) / lam s on average (dse.training.resilience.restart_wall_s), beyond any float
    once lam R > `RESTART_EXPONENT`; the lost work per failure would be infinite."""
    if math.isfinite(job.lost_work_per_failure_s):
        return
    least_h = job.restart_s / RESTART_EXPONENT / 3600.0
    flag = "--failures-per-day" if failures_per_day is not None else "--mtbf-hours" if mtbf_hours is not None \
        else "--system"
    raise StudyError(f"a failure every {1.0 / job.failures_per_s:.3g} s cuts every restart ({job.restart_s:,.0f} s) "
                     f"short: no restart ever finishes; allowed: a mean time between failures of at least "
                     f"{least_h:.3g} h ({24.0 / least_h:.3g} failures per day at most)", key=flag)


def _runs(counts: list) -> str:
    """Layers per stage with repeats run-length coded: 7, 8 x 14, 7."""
    parts, i = [], 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(str(counts[i]) if j - i == 1 else f"{counts[i]} x {j - i}")
        i = j
    return ", ".join(parts)


def _pp_layers(value: str | None) -> tuple:
    """--pp-layers as whole numbers (dse.training.stages.split checks them against the model)."""
    if value is None:
        return ()
    try:
        counts = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise StudyError(f"must be whole numbers separated by commas (first,last or one per stage), got {value!r}",
                         key="--pp-layers") from None
    if len(counts) > MAX_DEVICES:
        raise StudyError(f"at most {MAX_DEVICES:,} stages", key="--pp-layers")
    return counts


def _grid(value: str) -> str | float:
    """A grid name or a number of g CO2e per kWh (0 to 2000), checked here so a bad one names --grid."""
    from ..system.carbon import grid_g_per_kwh, grid_names
    try:
        number = float(value)
    except ValueError:
        if value not in grid_names():
            raise StudyError(f"unknown grid {value!r}; allowed: g CO2e per kWh or one of {', '.join(grid_names())}",
                             key="--grid") from None
        return value
    if not 0 <= number <= 2000:
        raise StudyError(f"must be 0 to 2000 g CO2e per kWh or a grid name, got {value}", key="--grid")
    return grid_g_per_kwh(number)
