"""Pipeline stages of unequal depth: the layers each of the pp stages holds, and 1F1B over unequal stages.

Split. Megatron-LM puts L / p layers on every stage; its ``--decoder-first-pipeline-num-layers`` and
``--decoder-last-pipeline-num-layers`` give the first and the last stage their own counts and the middle
stages the rest evenly. Meta trained Llama 3 405B's 126 layers on 16 stages with one layer fewer on the
first and on the last (Llama 3 paper, 2024, section 3.3.2: the embedding and the output layer and loss
unbalance those stages). `split` checks a split given as ``first,last`` or as every stage's count;
`balanced` is the default when p does not divide L: of the splits of Megatron's form (middle stages
equal), the one whose slowest stage is fastest, the first stage charged the embedding and the last
the final norm, output layer and loss; a tie goes to the fewest layers on the first stage (it holds the
most micro-batches in flight under 1F1B: `in_flight`).

Time. Stage i takes t_i per micro-batch (its forward and backward). 1F1B runs m micro-batches in
(m + p - 1) t when every stage takes t (Narayanan et al. SC'21, section 2.2: the bubble is (p - 1) t).
With unequal stages each micro-batch still passes every stage once, one at a time per stage: a flow
shop of m identical jobs, whose makespan is sum_i t_i + (m - 1) max_i t_i (the first micro-batch fills
and the last drains through every stage once; in between the slowest stage sets the pace and never
waits). The bubble on the slowest stage is sum_i t_i - max_i t_i, (p - 1) t for equal stages. With v
interleaved chunks a stage (whole layers each) the fill and drain pass chunks of t_i / v: the bubble is
divided by v, as Narayanan et al. (section 2.2) find for equal stages.
`schedule_s` runs the 1F1B schedule op by op (each stage's warm-up forwards, then one forward and one
backward in turn); the closed form is never below it, equal for equal stages, and within 1 % on
Megatron-style splits (tests/test_training_stages.py).
"""
from __future__ import annotations

from ..errors import StudyError
from .memory import device_bytes

KEY = "--pp-layers"


def split(layers: int, pp: int, given: tuple[int, ...]) -> tuple[int, ...]:
    """Every stage's layers from ``given``: ``(first, last)`` (the middle stages share the rest evenly) or
    one count per stage; a `StudyError` naming --pp-layers when they cannot be the model's layers."""
    if pp < 2:
        raise StudyError(f"splits the layers between pipeline stages: it needs --pp of at least 2, got {pp}",
                         key=KEY)
    if any(n < 1 for n in given):
        raise StudyError(f"each stage needs at least one layer, got {','.join(map(str, given))}", key=KEY)
    if len(given) == pp:
        counts = tuple(given)
    elif len(given) == 2:
        first, last = given
        rest = layers - first - last
        if pp < 2 or rest < pp - 2 or (pp > 2 and rest % (pp - 2)):
            raise StudyError(f"first {first} and last {last} leave {rest} of the {layers} layers, which the "
                             f"{pp - 2} middle stages cannot share evenly (at least one each)", key=KEY)
        counts = (first,) + (rest // (pp - 2),) * (pp - 2) + (last,) if pp > 2 else (first, last)
    else:
        raise StudyError(f"give first,last or {pp} counts (one per stage), got {len(given)}", key=KEY)
    if sum(counts) != layers:
        raise StudyError(f"the stages hold {sum(counts)} layers; the model has {layers}", key=KEY)
    return counts


def stage_times(counts: tuple[int, ...], layer_s: float, first_s: float, last_s: float) -> list[float]:
    """Each stage's time per micro-batch: its layers, the first stage also ``first_s`` (embedding) and
    the last ``last_s`` (final norm, output layer, loss); one stage holds both."""
    out = [n * layer_s for n in counts]
    out[0] += first_s if len(counts) > 1 else 0.0
    out[-1] += last_s
    return out


def balanced(layers: int, pp: int, layer_s: float, first_s: float, last_s: float) -> tuple[int, ...]:
    """The Megatron-form split (first, middle x (p - 2), last) whose slowest stage is fastest (module
    docstring); ties to the fewest layers on the first stage, then on the last."""
    if pp == 1:
        return (layers,)
    best = None
    for middle in range(1, layers) if pp > 2 else (0,):
        rest = layers - middle * (pp - 2)
        if rest < 2:
            break
        for first in range(1, rest):
            last = rest - first
            key = (max(first * layer_s + first_s, middle * layer_s, last * layer_s + last_s), first, last)
            if best is None or key < best:
                best = key
    if best is None:
        raise StudyError(f"{pp} stages cannot hold the model's {layers} layers (one at least each)", key="--pp")
    _, first, last = best
    return (first,) + ((layers - first - last) // (pp - 2),) * (pp - 2) + (last,) if pp > 2 else (first, last)


def stage_layers(layers: int, pp: int, given: tuple[int, ...], layer_s: float, first_s: float,
                 last_s: float) -> tuple[int, ...]:
    """The split used: ``given`` (`split`), else L / p each when p divides L (Megatron-LM's default), else
    `balanced`."""
    if given:
        return split(layers, pp, given)
    if layers % pp == 0:
        return (layers // pp,) * pp
    return balanced(layers, pp, layer_s, first_s, last_s)


def pipeline_s(times: list[float], micro_batches: int, interleave: int = 1) -> float:
    """1F1B over stages of ``times`` per micro-batch: m x max + (sum - max) / v (module docstring)."""
    slowest = max(times)
    return micro_batches * slowest + (sum(times) - slowest) / interleave


def in_flight(pp: int, micro_batches: int, interleave: int = 1) -> list[float]:
    """Micro-batches (of the whole stage) whose activations stage i keeps at its peak under 1F1B: min(p - i,
    m) (stage i runs p - i - 1 warm-up forwards and one more before its first backward; Narayanan et al.
    section 2.2). Interleaved over v chunks, 2 (p - i - 1) + (v - 1) p + 1 chunks, i.e.
    p + (p - 2 i - 1) / v micro-batches (every one, m, when m = p): on the first stage Korthikanti et
    al.'s p (1 + (p - 1) / (p v)) (section 4.2.3), and the later stages keep nearly as many (the last
    p - (p - 1) / v), not p - i. `schedule` counts them op by op (tests/test_training_stages.py)."""
    p, m, v = pp, micro_batches, interleave
    if v == 1:
        return [min(p - i, m) for i in range(p)]
    return [float(m) if m <= p else min(float(m), p + (p - 2 * i - 1) / v) for i in range(p)]


def _orders(p: int, m: int, v: int) -> list[list[tuple[str, int, int]]]:
    """Each stage's ops in Megatron-LM's order, as (kind, chunk, micro-batch). v = 1: p - i - 1 warm-up
    forwards, then a forward and a backward in turn, then the remaining backwards. v > 1 (interleaved,
    Megatron-LM's forward_backward_pipelining_with_interleaving): the k-th forward runs chunk
    (k // p) mod v of micro-batch (k // pv) p + k mod p, the k-th backward the same micro-batch's chunk
    v - 1 - (k // p) mod v; 2 (p - i - 1) + (v - 1) p warm-up forwards (every forward first when m = p),
    then one forward and one backward in turn."""
    total = m * v

    def forward(k):
        return ("F", (k // p) % v, (k // (p * v)) * p + k % p) if v > 1 else ("F", 0, k)

    def backward(k):
        return ("B", v - 1 - (k // p) % v, (k // (p * v)) * p + k % p) if v > 1 else ("B", 0, k)
    orders = []
    for i in range(p):
        w = min(p - i - 1 if v == 1 else total if m == p else 2 * (p - i - 1) + (v - 1) * p, total)
        order = [forward(k) for k in range(w)]
        for k in range(total):
            if w + k < total:
                order.append(forward(w + k))
            order.append(backward(k))
        orders.append(order)
    return orders


def schedule(forward_s: list[float], backward_s: list[float], micro_batches: int, interleave: int = 1
             ) -> tuple[float, list[float]]:
    """The 1F1B schedule run op by op (`_orders`; stage i's chunk forward takes forward_s[i] / v, its
    backward backward_s[i] / v): a forward waits for the same chunk on the stage before (chunk c on the
    first stage: chunk c - 1 on the last), a backward for the stage after (chunk c on the last stage:
    chunk c + 1 on the first, or its own forward for the last chunk). Returns when the last op ends and,
    per stage, the most micro-batches' activations it holds at once (forwards begun whose backward has
    not ended), in micro-batches of the whole stage (chunks / v). Point-to-point sends take no time."""
    p, m, v = len(forward_s), micro_batches, interleave
    if v > 1 and m % p:
        raise ValueError(f"the interleaved schedule needs micro-batches ({m}) a multiple of the stages ({p})")
    orders = _orders(p, m, v)
    done: dict = {}
    free = [0.0] * p
    nxt = [0] * p
    held, peak = [0] * p, [0] * p
    moved = True
    while moved:
        moved = False
        for i in range(p):
            while nxt[i] < len(orders[i]):
                kind, c, j = orders[i][nxt[i]]
                if kind == "F":
                    dep = ("F", i - 1, c, j) if i else (("F", p - 1, c - 1, j) if c else None)
                elif i < p - 1:
                    dep = ("B", i + 1, c, j)
                else:
                    dep = ("B", 0, c + 1, j) if c < v - 1 else ("F", i, c, j)
                if dep is not None and dep not in done:
                    break
                start = max(free[i], done.get(dep, 0.0))
                free[i] = done[(kind, i, c, j)] = start + (forward_s[i] if kind == "F" else backward_s[i]) / v
                held[i] += 1 if kind == "F" else -1
                peak[i] = max(peak[i], held[i])
                nxt[i] += 1
                moved = True
    if any(nxt[i] < len(orders[i]) for i in range(p)):
        raise RuntimeError("the 1F1B schedule deadlocked")      # cannot happen for Megatron's orders
    return max(free), [x / v for x in peak]


def schedule_s(forward_s: list[float], backward_s: list[float], micro_batches: int, interleave: int = 1) -> float:
    """When the last op of `schedule` ends."""
    return schedule(forward_s, backward_s, micro_batches, interleave)[0]


def uneven_peak_bytes(counts: tuple[int, ...], params_per_layer: float, activation_per_layer: float,
                      logits: float, micro_batches: int, interleave: int, stack, zero: int, dp: int) -> float:
    """The largest device memory over the stages (dse.training.memory.device_bytes): stage i keeps the
    parameters of its layers (the embedding and output layer spread in proportion, as for an even split),
    the activations of its layers for `in_flight` micro-batches (interleaved: Korthikanti et al. section
    4.2.3 on the first stage, the schedule's own count on the others), and the last stage the logits."""
    flight = in_flight(len(counts), micro_batches, interleave)
    return max(device_bytes(params_per_layer * n, stack, zero, dp, n * activation_per_layer * f,
                            logits if i == len(counts) - 1 else 0.0)
               for i, (n, f) in enumerate(zip(counts, flight)))
