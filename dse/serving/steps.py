"""Step latencies and energies of one design for a serving simulation: the project's step model at a grid
of batch sizes and contexts, interpolated.

A prefill of ``b`` prompts of ``L`` tokens and a decode step of ``b`` sequences holding ``L`` tokens each
are evaluated by the study's own evaluator (dse.model) on the design, at a grid of b and L (powers of
two up to the study's caps); between grid points the latency is interpolated linearly in log b and
log L (times grow smoothly with both: compute and weight and KV bytes are sums of terms linear in b and
L), extrapolated linearly beyond the grid's edges (scipy's RegularGridInterpolator, method linear, with the
same arithmetic: a simulation asks for a step hundreds of thousands of times, and a scalar look-up here is
about 30 times faster than scipy's call). The grid's error against direct evaluation is measured in
tests/test_serving.py. A step's energy (J: the evaluator's energy per token x the step's tokens) is
interpolated the same way.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from ..model.evaluator import Evaluator
from ..model.prepare import Prepared
from ..model.tables import build_tables
from ..study.space import Design, build_space

BATCHES = (1, 4, 16, 64, 256, 1024)
CONTEXTS = (128, 512, 2048, 8192, 32768, 131072)


def step_latency_s(prepared: Prepared, design: Design, phase: str, batch: int, context: int) -> float:
    """The evaluator's latency of one step of ``design`` with the study's workload at this phase, batch
    and context (faults off)."""
    return step_figures(prepared, design, phase, batch, context)[0]


def step_figures(prepared: Prepared, design: Design, phase: str, batch: int, context: int) -> tuple:
    """(seconds, joules, capacity shortfall in bytes) of one step of ``design`` at this phase, batch and
    context (faults off)."""
    study = prepared.study
    workload = study.workload.model_copy(update={"phase": phase, "batch": int(batch), "context": int(context)})
    changed = study.model_copy(update={"workload": workload})
    tables = build_tables(changed)
    space = build_space(changed, tables.kind_names, tables.unit_names)
    evaluator = Evaluator(tables, space, changed.hardware.package, changed.mapping.max_replicas, faults=changed.faults)
    row = evaluator.evaluate_designs([design], with_faults=False).iloc[0]
    return (float(row["latency_s"]), float(row["energy_j_per_token"]) * tables.tokens_per_step,
            float(row["capacity_short_bytes"]))


@dataclass
class StepTable:
    """Prefill and decode step latency (and energy) of one design over a (batch, context) grid, interpolated."""

    batches: np.ndarray
    contexts: np.ndarray
    prefill_s: np.ndarray              # [batches, contexts]
    decode_s: np.ndarray
    prefill_j: np.ndarray | None = None     # [batches, contexts]; None: energy not known
    decode_j: np.ndarray | None = None
    idle_w: float = 0.0                     # the design's chips waiting between steps (arch.power.idle_power_w)
    routed: bool = False                    # the model routes tokens to experts (a pass reads the experts they touch)

    def __post_init__(self):
        self._grid = (np.log(self.batches).tolist(), np.log(self.contexts).tolist())
        # an axis of one point: the figures constant along it (as scipy's), the point's cell padded
        pad = lambda values: np.pad(values, [(0, 1 if n == 1 else 0) for n in values.shape], mode="edge")  # noqa: E731
        log_values = lambda values: pad(np.log(values)).tolist()       # noqa: E731
        self._prefill, self._decode = log_values(self.prefill_s), log_values(self.decode_s)
        self._prefill_j = log_values(self.prefill_j) if self.prefill_j is not None else None
        self._decode_j = log_values(self.decode_j) if self.decode_j is not None else None
        self._point, self._place = None, None

    def _cells(self, batch: float, context: float) -> tuple:
        """The grid cells of (log batch, log context) and the point's place in them (the last point's kept:
        a simulation asks for a step's time and its energy at the same point)."""
        if (batch, context) != self._point:
            self._point = (batch, context)
            self._place = (_cell(self._grid[0], math.log(max(batch, 1.0))),
                           _cell(self._grid[1], math.log(max(context, 1.0))))
        return self._place

    def _at(self, values: list, batch: float, context: float) -> float:
        """exp of the bilinear interpolation of ``values`` (log figures) at (log batch, log context): the
        cell's corners weighted as scipy's ``evaluate_linear_2d`` weighs them, the edge cells extended."""
        (i, y0), (j, y1) = self._cells(batch, context)
        result = 0.0
        result = result + values[i][j] * (1 - y0) * (1 - y1)
        result = result + values[i][j + 1] * (1 - y0) * y1
        result = result + values[i + 1][j] * y0 * (1 - y1)
        result = result + values[i + 1][j + 1] * y0 * y1
        return math.exp(result)

    def prefill(self, batch: float, context: float) -> float:
        """Seconds to prefill ``batch`` prompts of ``context`` tokens."""
        return self._at(self._prefill, batch, context)

    def decode(self, batch: float, context: float) -> float:
        """Seconds of one decode step of ``batch`` sequences of ``context`` tokens."""
        return self._at(self._decode, batch, context)

    def prefill_energy(self, batch: float, context: float) -> float:
        """Joules of prefilling ``batch`` prompts of ``context`` tokens (NaN when not known)."""
        return self._at(self._prefill_j, batch, context) if self._prefill_j is not None else float("nan")

    def decode_energy(self, batch: float, context: float) -> float:
        """Joules of one decode step of ``batch`` sequences of ``context`` tokens (NaN when not known)."""
        return self._at(self._decode_j, batch, context) if self._decode_j is not None else float("nan")

    @classmethod
    def build(cls, prepared: Prepared, design: Design, max_batch: int, max_context: int,
              point=step_figures) -> "StepTable":
        """The grid up to ``max_batch`` and ``max_context``, each point by ``point`` (`step_figures`, or a
        function with its arguments and results, e.g. one that remembers points several tables share)."""
        batches = np.array([b for b in BATCHES if b <= max(max_batch, 2)] or [1, 2], float)
        if batches[-1] < max_batch:
            batches = np.append(batches, max_batch)
        contexts = np.array([c for c in CONTEXTS if c <= max(max_context, 128)], float)
        if contexts[-1] < max_context:
            contexts = np.append(contexts, max_context)
        prefill = np.array([[point(prepared, design, "prefill", b, c) for c in contexts] for b in batches])
        decode = np.array([[point(prepared, design, "decode", b, c) for c in contexts] for b in batches])
        for figures in (prefill, decode):
            for k in (0, 1):
                figures[..., k] = extrapolate_short(contexts, figures[..., k], figures[..., 2] > 0)
        summary = prepared.tables.workload.summary
        routed = summary.get("active_params_per_token", 0.0) < summary.get("total_params", 0.0)
        return cls(batches=batches, contexts=contexts, prefill_s=prefill[..., 0], decode_s=decode[..., 0],
                   prefill_j=prefill[..., 1], decode_j=decode[..., 1], idle_w=idle_power_w(prepared, design),
                   routed=bool(routed))


def idle_power_w(prepared: Prepared, design: Design) -> float:
    """What the design's chiplets draw while the server waits for requests: each one's idle power
    (arch.idle_power_w, dse.model.tables' ``kind_idle_w``), for every package of a system's layout."""
    tables = prepared.tables
    idle = {name: float(w) for name, w in zip(tables.kind_names, tables.kind_idle_w)}
    layout = design.system or {}
    packages = int(layout.get("pipeline", 1)) * int(layout.get("experts", 1)) * int(layout.get("replicas", 1))
    return packages * sum(idle.get(kind, 0.0) for kind in design.chiplets)


def slot_idle_w(tables, kind: np.ndarray, chiplets: np.ndarray) -> np.ndarray:
    """`idle_power_w` of each chiplet slot over kernel arrays (dse.model.contract.DecodedDesigns: ``kind``
    [P, S] the chiplet kind per slot, ``chiplets`` [P] the slots in use): W ``[P, S]`` (0 where unused or
    unknown)."""
    kind = np.asarray(kind)
    used = np.arange(kind.shape[1])[None, :] < np.asarray(chiplets)[:, None]
    return np.where(used, np.asarray(tables.kind_idle_w)[np.clip(kind, 0, None)], 0.0)


def package_idle_w(tables, kind: np.ndarray, chiplets: np.ndarray) -> np.ndarray:
    """`idle_power_w` of one package over kernel arrays (`slot_idle_w` summed): W per design."""
    return slot_idle_w(tables, kind, chiplets).sum(axis=1)


def _cell(axis: list, x: float) -> tuple[int, float]:
    """(i, t): the grid cell [axis[i], axis[i + 1]] of ``x`` (the first or last beyond the edges) and
    x's position in it (0 to 1 inside, beyond outside), as scipy's find_indices places it."""
    if len(axis) == 1:
        return 0, 0.0
    i = min(max(bisect_right(axis, x) - 1, 0), len(axis) - 2)
    return i, (x - axis[i]) / (axis[i + 1] - axis[i])


def extrapolate_short(contexts: np.ndarray, values: np.ndarray, short: np.ndarray) -> np.ndarray:
    """Grid points whose KV cache does not fit the design's memory (the step model's latency there is a
    capacity violation's, not a time; the simulator's admission never lets a batch reach them), set
    affine in context (the KV cache's bytes are) through the row's two largest contexts that fit, so that
    interpolating near the capacity stays physical. Rows with fewer than two such points keep theirs."""
    out = values.copy()
    for i in range(values.shape[0]):
        fits = np.flatnonzero(~short[i])
        if short[i].any() and len(fits) >= 2:
            a, b = fits[-2], fits[-1]
            slope = max((values[i, b] - values[i, a]) / (contexts[b] - contexts[a]), 0.0)
            out[i, short[i]] = values[i, b] + slope * (contexts[short[i]] - contexts[b])
    return out


def step_energy_j(steps, phase: str, batch: float, context: float) -> float:
    """Joules of one step from ``steps`` (a `StepTable`, or anything with ``prefill`` and ``decode``: NaN)."""
    energy = getattr(steps, f"{phase}_energy", None)
    return energy(batch, context) if energy is not None else float("nan")


#: context (tokens) at which a pass's fixed part is read off the decode steps (the grid's smallest)
PASS_CONTEXT = 128.0
#: prompt length (tokens) at which a token's compute is read off the prefill steps (1 and 4 such prompts)
TOKEN_CONTEXT = 512.0


def pass_fixed(steps, joules: bool = False) -> float:
    """W of `mixed_step`: seconds (joules) of a pass over no tokens, the decode steps of 1 and 4 sequences
    at `PASS_CONTEXT` extended affinely to none (within [0, the step of one])."""
    decode = (lambda b, c: step_energy_j(steps, "decode", b, c)) if joules else steps.decode   # noqa: E731
    one, four = decode(1, PASS_CONTEXT), decode(4, PASS_CONTEXT)
    return min(max(one - (four - one) / 3.0, 0.0), one)


def token_compute_s(steps) -> float:
    """a of `mixed_step`: seconds a token adds to a compute-bound pass, the prefill of 4 prompts of
    `TOKEN_CONTEXT` tokens less that of 1, per token (their attention within 512 tokens included)."""
    return max((steps.prefill(4, TOKEN_CONTEXT) - steps.prefill(1, TOKEN_CONTEXT)) / (3.0 * TOKEN_CONTEXT), 0.0)


def pass_full(steps, per_token: float | None = None) -> float:
    """Seconds of a pass that reads every weight (all experts of a mixture-of-experts model) with no
    token's compute. For a dense model (``steps.routed`` false or absent) it is W (`pass_fixed`: its every
    pass reads every weight); for a model with routed experts the prefill of one prompt of `PASS_CONTEXT`
    tokens less their compute (a), at least W: W, from decodes of 1 and 4 sequences, reads only the
    experts few tokens touch, while 128 tokens touch them all (top-2 of 8: an expert missed with
    probability (3/4)^256)."""
    fixed = pass_fixed(steps)
    if not getattr(steps, "routed", False):
        return fixed
    a = token_compute_s(steps) if per_token is None else per_token
    return max(fixed, steps.prefill(1, PASS_CONTEXT) - a * PASS_CONTEXT)


def mixed_step(steps, decodes: float, context: float, prompts: float, tokens: float, prefix: float = 0.0,
               joules: bool = False, fixed: float | None = None, per_token: float | None = None,
               fixed_s: float | None = None, full: float | None = None) -> float:
    """Seconds (or with ``joules`` joules) of one forward pass over a mixed batch: ``decodes`` sequences
    decoding one token each at a mean ``context``, and ``prompts`` prompt pieces of ``tokens`` tokens each,
    whose first token follows ``prefix`` tokens already in the KV cache (chunked prefill's earlier chunks,
    or a cached prefix). The pass reads the weights and pays its kernels' overheads once (vLLM V1,
    SGLang, Sarathi-Serve run the decodes and the chunks as one batch: projections and experts see
    decodes + prompts x tokens rows, attention runs per sequence).

    From ``steps`` (``decode(batch, context)``, ``prefill(batch, context)``): D = decode(decodes, context);
    the pieces alone C = prefill(prompts, tokens), after a prefix at least prefill(prompts, prefix + tokens)
    - prefill(prompts, prefix) (the marginal of extending the prompts: their tokens and their attention
    over the prefix); W, the pass over no tokens (weights and overheads, `pass_fixed`); a, a token's
    compute in a compute-bound pass (`token_compute_s`). The projections of m tokens take max(W, a m)
    (the kernels' roofline), the rest of a step (attention, KV reads) adds to it, so the pass is
    max(W, a (d + T)) + (D - max(W, a d)) + (C - max(W, a T)), T the pieces' tokens, and no less than
    either part alone: where both parts are bound by the weights' reads it reads them once (D + C - W);
    where the batch is compute bound the decodes' tokens add their compute. Energy adds up, the weights
    read once, D + C - W, plus the time the pass lasts beyond the two parts less W's at the power of the
    pass over no tokens (W's joules over its seconds: the chips stay busy while the compute runs). Pure decodes give D, a pure prefill without prefix C, as the steps do; on
    affine steps (dse.serving.analytic) bound by the weights a chunk adds p0 - W + pk c / P, as the closed
    form's mixed iteration does (dse.serving.closed_form.chunked). With routed experts the weights a part
    reads grow with its tokens (the experts they touch), so each part's W is its own, W_d = D and W_c = C
    capped at the pass that reads every weight (`pass_full`: W for a dense model), and the pass reads the larger:
    max(W_d, W_c, a (d + T)) + (D - max(W_d, a d)) + (C - max(W_c, a T)); for a dense model W_d = W_c = W,
    the formula above (issue 50: a 3-token chunk riding with 40 decodes of Mixtral-8x7B on two H100s cost
    10 ms, half a step, when W was the decode of one sequence's two experts; now nothing but its tokens).
    ``fixed``, ``per_token``, ``fixed_s``, ``full``: W (in the figure asked for), a, W and `pass_full` in
    seconds when known (a simulation reads them once)."""
    if joules:
        decode = lambda b, c: step_energy_j(steps, "decode", b, c)          # noqa: E731
        prefill = lambda b, c: step_energy_j(steps, "prefill", b, c)        # noqa: E731
    else:
        decode, prefill = steps.decode, steps.prefill
    if decodes <= 0 and (prompts <= 0 or tokens <= 0):
        return 0.0
    fixed = pass_fixed(steps, joules) if fixed is None else fixed
    d = decode(decodes, context) if decodes > 0 else fixed
    if prompts <= 0 or tokens <= 0:
        return d
    c = prefill(prompts, tokens)
    if prefix >= 1.0:
        c = max(c, prefill(prompts, prefix + tokens) - prefill(prompts, prefix))
    if decodes <= 0:
        return c
    a = token_compute_s(steps) if per_token is None else per_token
    if joules:
        w_s = pass_fixed(steps) if fixed_s is None else fixed_s
        seconds = lambda *sizes: mixed_step(steps, *sizes, fixed=w_s, per_token=a, full=full)      # noqa: E731
        beyond = seconds(decodes, context, prompts, tokens, prefix) - seconds(decodes, context, 0, 0.0) - \
            seconds(0, 0.0, prompts, tokens, prefix) + w_s
        return max(d + c - fixed + (fixed / w_s * beyond if w_s > 0 else 0.0), d, c)
    chunk = prompts * tokens
    # the weights each part reads: W for a dense model; with routed experts the experts its tokens touch,
    # up to every weight (`pass_full`): the decodes' D and the chunk's C, each at most that; the pass
    # reads the union once
    full = pass_full(steps, a) if full is None else full
    if full > fixed:
        w_d, w_c = max(fixed, min(d, full)), max(fixed, min(c, full))
        rest = max(d - max(w_d, a * decodes), 0.0) + max(c - max(w_c, a * chunk), 0.0)
        return max(max(w_d, w_c, a * (decodes + chunk)) + rest, d, c)
    rest = max(d - max(fixed, a * decodes), 0.0) + max(c - max(fixed, a * chunk), 0.0)
    return max(max(fixed, a * (decodes + chunk)) + rest, d, c)


def idle_energy_j(steps, seconds: float) -> float:
    """Joules the server's chips draw waiting ``seconds`` for requests: the step table's ``idle_w``
    (arch.idle_power_w; 0 for a table without it) times the wait."""
    return float(getattr(steps, "idle_w", 0.0)) * max(seconds, 0.0)
