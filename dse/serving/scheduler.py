"""The iteration-level schedulers of dse.serving.simulate (continuous batching and chunked prefill) over a
paged KV cache (dse.serving.kv_cache), as vLLM runs them.

Before every iteration the running sequences are scheduled first (each decoding one token; under chunked
prefill a prompt still being computed takes its next chunk from the iteration's token budget, vLLM's
``max_num_batched_tokens``), then waiting requests first come first served while there is a seat
(``max_num_seqs``), budget (chunked) and KV blocks for what they compute now (a cached prefix is taken
from the cache, not computed). Blocks are allocated as sequences grow; when the running sequences' next
tokens do not fit, the last admitted is preempted (vLLM V1's default: recompute): its blocks freed, it
waits at the head of the queue and later computes its prompt and the tokens it had generated again, as a
prefill (whatever of it is still cached is taken from the cache). Continuous batching (Orca, vLLM
without chunking) prefills newly admitted prompts whole, in an iteration of their own (prefill first);
otherwise it decodes every running sequence. An iteration's time and energy are one forward pass over
its mixed batch (dse.serving.steps.mixed_step); a server's first iteration may also carry a one-off
``cold_start_s`` (start-up work on the first requests, e.g. kernels compiled on first use; its chips
counted at idle power meanwhile), and every iteration ``sequence_s`` per sequence in it (the host's work
per request and step, dse.serving.request_path; the chips at idle power meanwhile).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from .kv_cache import BLOCK, KvCache, blocks
from .requests import Requests
from .steps import idle_energy_j, mixed_step, pass_fixed, pass_full, token_compute_s


def prompt_keys(r: Requests, i: int) -> list:
    """The keys of request ``i``'s full prompt blocks: a shared prefix's blocks by prefix, the rest by
    distinct prompt (a block's key stands for every token up to its end, as vLLM's block hashes chain)."""
    prompt_id = i if r.prompt_id is None else int(r.prompt_id[i])
    full = int(r.prompt[i] // BLOCK)
    if r.prefix_id is None:
        return [("prompt", prompt_id, j) for j in range(full)]
    shared = r.prefix_len // BLOCK
    return [("prefix", int(r.prefix_id[i]), j) if j < shared else ("prompt", prompt_id, j) for j in range(full)]


class Server:
    """One run of ``r`` (module docstring); `run` serves it all and leaves per request ``first`` and
    ``done`` (s), ``sent`` (the client's send times), the inter-token gaps ``itl``, ``energy`` (J), the
    iteration log ``log`` (seconds, tokens out, joules, sequences running), ``preemptions``."""

    def __init__(self, r: Requests, steps, chunked: bool, max_batch: int, concurrency: int | None,
                 cache: KvCache, chunk_tokens: int, prefill_budget: int | None = None, lookahead: bool = False,
                 cold_start_s: float = 0.0, sequence_s: float = 0.0):
        self.r, self.steps, self.chunked, self.cache, self.chunk = r, steps, chunked, cache, chunk_tokens
        self.cold_start_s = cold_start_s          # added to the server's first step (one-off start-up work)
        self.sequence_s = sequence_s              # host time per sequence in a step (s), added to every step
        self.lookahead = lookahead                # async scheduling: a step is scheduled when the one before starts
        self.prefill_budget = prefill_budget      # continuous: max_num_batched_tokens of a prefill (None: all)
        self.fixed_s, self.fixed_j = pass_fixed(steps), pass_fixed(steps, joules=True)
        self.per_token = token_compute_s(steps)
        self.full_s = pass_full(steps, self.per_token)
        n = len(r)
        self.concurrency = concurrency
        self.limit = min(max_batch, concurrency or max_batch)
        self.sent = r.arrival_s.astype(float).copy()
        self.freed: deque[float] = deque([-np.inf] * concurrency) if concurrency else deque()
        self.first, self.done = np.full(n, np.nan), np.full(n, np.nan)
        self.generated, self.last_token = np.zeros(n), np.zeros(n)
        self.target = r.prompt.astype(float).copy()       # tokens to compute as a prefill (a prompt, or a recompute)
        self.computed = np.zeros(n)                       # tokens in the KV cache (computed or taken from it)
        self.held = np.zeros(n)                           # KV blocks held
        self.keys: list[list] = [[] for _ in range(n)]    # of them, shared (cached prompt blocks)
        self.sent_once = np.zeros(n, bool)
        self.waiting: deque[int] = deque()
        self.running = np.zeros(0, np.int64)              # in admission order
        self.itl: list[np.ndarray] = []
        self.log: list[tuple] = []
        self.t = self.energy = 0.0
        self.step_start = -np.inf                 # when the step just run started (lookahead's horizon)
        self.preemptions = 0
        self.admitted_tokens = np.zeros(0)

    def run(self) -> "Server":
        r, n = self.r, len(self.r)
        order = np.argsort(r.arrival_s, kind="stable")
        nxt = finished = 0
        while finished < n:
            nxt = self.arrive(order, nxt)
            if not len(self.running) and not self.waiting:
                if nxt < n and r.arrival_s[order[nxt]] > self.t:
                    self.energy += idle_energy_j(self.steps, float(r.arrival_s[order[nxt]]) - self.t)
                    self.t = float(r.arrival_s[order[nxt]])
                continue
            finished += self.iteration()
        return self

    def arrive(self, order: np.ndarray, nxt: int) -> int:
        """Queue the requests (``order``: by arrival, from the ``nxt``-th) that the next step sees; the
        index of the first left out. With lookahead (vLLM's async scheduling) the step about to run was
        scheduled when the one before it started: it holds the requests that had arrived by then."""
        horizon = self.step_start if self.lookahead and len(self.running) else self.t
        arrival, n = self.r.arrival_s, len(self.r)
        while nxt < n and arrival[order[nxt]] <= horizon:
            self.waiting.append(int(order[nxt]))
            nxt += 1
        return nxt

    def busy(self) -> bool:
        """Whether a sequence runs or a request waits."""
        return bool(len(self.running) or self.waiting)

    def _tokens(self, running: np.ndarray) -> np.ndarray:
        """Tokens each running sequence computes this iteration: one for a decode, the next chunk of a
        prompt from the budget left after the decodes (chunked), the whole rest (continuous)."""
        left = self.target[running] - self.computed[running]
        prompt = left > 0
        if not self.chunked or not prompt.any():
            return np.where(prompt, left, 1.0)
        budget = max(self.chunk - float((~prompt).sum()), 0.0)
        before = np.cumsum(np.where(prompt, left, 0.0)) - np.where(prompt, left, 0.0)
        return np.where(prompt, np.clip(budget - before, 0.0, left), 1.0)

    def _fit(self) -> np.ndarray:
        """The running sequences' tokens this iteration, the last admitted preempted until their blocks fit."""
        while True:
            tokens = self._tokens(self.running)
            need = np.maximum(blocks(self.computed[self.running] + tokens) - self.held[self.running], 0.0)
            if need.sum() <= self.cache.free() or len(self.running) <= 1:
                self.cache.allocate(float(need.sum()))
                self.held[self.running] += need
                return tokens
            self._preempt(int(self.running[-1]))

    def _preempt(self, i: int) -> None:
        self.cache.release(self.keys[i], self.held[i] - len(self.keys[i]))
        self.keys[i], self.held[i], self.computed[i] = [], 0.0, 0.0
        self.target[i] = self.r.prompt[i] + self.generated[i]
        self.running = self.running[:-1] if self.running[-1] == i else self.running[self.running != i]
        self.waiting.appendleft(i)
        self.preemptions += 1

    def _admit(self, budget: float) -> list[int]:
        """Waiting requests admitted (their blocks taken), first come first served, while a seat, budget and
        blocks last; each one's first tokens set in ``self.admitted_tokens``."""
        admitted, tokens = [], []
        while self.waiting and len(self.running) + len(admitted) < self.limit and budget > 0:
            i = self.waiting[0]
            keys = prompt_keys(self.r, i) if self.cache.caching else []
            found = self.cache.hit(keys, self.target[i])
            cached = found * BLOCK
            take = min(self.target[i] - cached, budget) if self.chunked else self.target[i] - cached
            if not self.chunked and admitted and take > budget:
                break                                      # continuous: whole prompts within the budget
            self.cache.acquire(keys[:found])
            need = float(blocks(cached + take)) - found
            if need > self.cache.free():
                self.cache.release(keys[:found], 0.0)
                break
            self.cache.allocate(need)
            self.cache.record(found, self.target[i])
            self.keys[i], self.held[i], self.computed[i] = keys[:found], found + need, cached
            if self.concurrency and not self.sent_once[i]:
                self.sent[i] = max(self.sent[i], self.freed.popleft())
            self.sent_once[i] = True
            admitted.append(self.waiting.popleft())
            tokens.append(take)
            budget -= take if self.chunked or self.prefill_budget else 0.0
        self.admitted_tokens = np.array(tokens, float)
        return admitted

    def iteration(self) -> int:
        """One iteration (module docstring); the requests it finished."""
        return self._step(*self.schedule())

    def schedule(self) -> tuple[np.ndarray, np.ndarray]:
        """The next iteration's sequences and the tokens each computes (module docstring): the running
        sequences first (preempting while their blocks do not fit), then the waiting admitted."""
        preempted = self.preemptions
        if self.chunked:
            tokens = self._fit()
            budget = self.chunk - float(tokens.sum()) if self.preemptions == preempted else 0.0
            admitted = self._admit(budget)
            running = np.concatenate([self.running, np.array(admitted, np.int64)])
            tokens = np.concatenate([tokens, self.admitted_tokens])
        else:
            admitted = self._admit(float(self.prefill_budget) if self.prefill_budget else np.inf)
            if admitted:
                running = np.array(admitted, np.int64)
                tokens = self.admitted_tokens
            else:
                tokens = self._fit()
                running = self.running
        self.running = np.concatenate([self.running, np.array(admitted, np.int64)])
        return running, tokens

    def plan(self, running: np.ndarray, tokens: np.ndarray) -> tuple:
        """(the pass's sizes as dse.serving.steps.mixed_step takes them, the prompt pieces in it, the pass's
        seconds) over ``running`` computing ``tokens`` each."""
        prompt = self.computed[running] < self.target[running]
        piece = prompt & (tokens > 0)
        pieces, decodes = running[piece], running[~prompt]
        n, k = len(decodes), len(pieces)
        sizes = (n, float(self.computed[decodes].sum()) / n + 1.0 if n else 0.0, k,
                 float(tokens[piece].sum()) / k if k else 0.0, float(self.computed[pieces].sum()) / k if k else 0.0)
        return sizes, pieces, mixed_step(self.steps, *sizes, fixed=self.fixed_s, per_token=self.per_token,
                                         full=self.full_s)

    def end_s(self, running: np.ndarray, seconds: float) -> float:
        """When a step over ``running`` whose pass takes ``seconds``, starting now, ends on this server alone:
        the pass, the one-off start-up work, the host's work per sequence (as `step` adds them)."""
        t = self.t + seconds
        if self.cold_start_s:
            t += self.cold_start_s
        if self.sequence_s:
            t += self.sequence_s * len(running)
        return t

    def step(self, running: np.ndarray, tokens: np.ndarray, plan: tuple, until: float) -> int:
        """`_step` with its `plan` known, the step lasting ``until`` (s) where a slower server it steps
        with ends later (dse.serving.data_parallel: the chips idle meanwhile); the requests done."""
        return self._step(running, tokens, plan, until)

    #: a dummy pass's sizes (dse.serving.steps.mixed_step): one sequence decoding one token
    DUMMY = (1, 1.0, 0, 0.0, 0.0)

    def dummy_end_s(self) -> float:
        """When a dummy pass (`dummy_step`) starting now ends on this server alone: the pass of one token
        and, on the server's first step, its one-off start-up work (the dummy pass runs the same layers)."""
        return self.t + mixed_step(self.steps, *self.DUMMY, fixed=self.fixed_s, per_token=self.per_token,
                                   full=self.full_s) + self.cold_start_s

    def dummy_step(self, until: float) -> None:
        """A pass with no request in it that ends at ``until`` (s): vLLM's dummy forward pass of one token
        on a data-parallel rank with nothing scheduled (dse.serving.data_parallel); its energy that of a
        one-sequence decode, the chips idle for the rest (the start-up work's included, paid once)."""
        self.step_start = self.t
        seconds = mixed_step(self.steps, *self.DUMMY, fixed=self.fixed_s, per_token=self.per_token, full=self.full_s)
        self.energy += mixed_step(self.steps, *self.DUMMY, joules=True, fixed=self.fixed_j,
                                  per_token=self.per_token, fixed_s=self.fixed_s, full=self.full_s)
        self.energy += idle_energy_j(self.steps, until - self.t - seconds)
        self.cold_start_s = 0.0
        self.t = max(until, self.t)

    def _step(self, running: np.ndarray, tokens: np.ndarray, plan: tuple | None = None,
              until: float | None = None) -> int:
        """Run the pass over ``running`` computing ``tokens`` each; hand out its tokens; the requests done."""
        r = self.r
        sizes, pieces, seconds = self.plan(running, tokens) if plan is None else plan
        t0, e0 = self.t, self.energy
        self.step_start = t0
        self.t += seconds
        if self.cold_start_s:                     # the first step pays the start-up work, the chips idle-ish
            self.t += self.cold_start_s
            self.energy += idle_energy_j(self.steps, self.cold_start_s)
            self.cold_start_s = 0.0
        if self.sequence_s:                       # the host's work per sequence in the step, the GPU waiting
            host = self.sequence_s * len(running)
            self.t += host
            self.energy += idle_energy_j(self.steps, host)
        self.energy += mixed_step(self.steps, *sizes, joules=True, fixed=self.fixed_j, per_token=self.per_token,
                                  fixed_s=self.fixed_s, full=self.full_s)
        if until is not None and until > self.t:  # stepping with a slower server: wait for it, the chips idle
            self.energy += idle_energy_j(self.steps, until - self.t)
            self.t = until
        self.computed[running] += tokens
        produced = running[self.computed[running] >= self.target[running]]
        if self.cache.caching:
            for i in pieces[self.computed[pieces] >= self.target[pieces]]:
                new = prompt_keys(r, int(i))[len(self.keys[i]):]
                self.cache.publish(new)
                self.keys[i] = self.keys[i] + new
        self.log.append((self.t - t0, len(produced), self.energy - e0, len(self.running)))
        t = self.t
        started = self.generated[produced] > 0
        self.first[produced[~started]] = t
        if started.any():
            self.itl.append(t - self.last_token[produced[started]])
        self.last_token[produced] = t
        self.generated[produced] += 1
        ended = produced[self.generated[produced] >= r.output[produced]]
        if len(ended):
            self.done[ended] = t
            for i in ended:
                self.cache.release(self.keys[i], self.held[i] - len(self.keys[i]))
                self.keys[i], self.held[i] = [], 0.0
            if self.concurrency:
                self.freed.extend([t] * len(ended))
            self.running = self.running[self.generated[self.running] < r.output[self.running]]
        return len(ended)
