"""`TrainingClusterEnv`: a PettingZoo ``ParallelEnv`` in which the nodes of a training cluster schedule a
stream of training jobs (dse.rl.training_cluster_env builds it; docs/rl.md).

Agents are the nodes (``node_0`` ...) of ``nodes`` nodes of a dse.training system preset (or system YAML).
Jobs come from dse.rl.cluster_jobs (a seeded Poisson stream, redrawn at each reset from its seed, or a
trace), their costs from dse.rl.cluster_costs, the cluster's dynamics and the actions from
dse.rl.cluster_sim, the reward from dse.rl.cluster_reward.

Observation of an agent (a Dict, PettingZoo's convention for masks): ``action_mask`` (int8, the actions
valid now) and ``observation`` (float32): the cluster (idle share, waiting and running jobs over their
slots, hours elapsed / 24), each waiting slot (present, hours to finish at its start nodes / 24,
priority / 4, start nodes / nodes, hours waited / 24, GPU-hours attained / (GPUs per node x 24)), each
running slot (present, nodes / nodes, hours left / 24, tokens per second gained by one more unit of nodes
relative to now, stop left / interval, priority / 4), and the agent's own (idle, one-hot of its job's
running slot, its job's nodes / nodes). ``infos[agent]`` has ``action_mask`` too, ``dropped`` (whether
its last action was dropped) and, at the end, the episode's metrics (ClusterSim.metrics).

PettingZoo is imported only here (``pip install pettingzoo``, in the ``rl`` and ``test`` extras);
without it the class still runs, as a plain object with the same methods.
"""
from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from ..errors import StudyError
from ..training import load_system
from ..training.resilience import resilience_from
from .cluster_costs import JobCosts
from .cluster_jobs import check_number, check_stream, poisson_jobs, read_trace
from .cluster_reward import reward, step_terms
from .cluster_sim import ClusterSim
from .reward_weights import reward_weights as parse_weights

try:
    from pettingzoo import ParallelEnv
except ImportError:             # pragma: no cover - the env runs without PettingZoo's base class
    ParallelEnv = object

#: failures per node per day: 419 unexpected interruptions in 54 days of Llama 3 405B pre-training on
#: 16,384 H100s in 2,048 nodes (Dubey et al., "The Llama 3 Herd of Models", 2024, section 3.3.4)
FAILURES_PER_NODE_DAY = 419 / 54 / 2048
MAX_NODES = 100_000
CLUSTER, QUEUE, RUNNING = 4, 6, 6           # observation features of the cluster and of each slot


class TrainingClusterEnv(ParallelEnv):
    """The multi-agent cluster scheduler (module docstring; arguments: dse.rl.training_cluster_env)."""

    metadata = {"name": "dse_training_cluster_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, system: str = "dgx-a100-80gb", nodes: int = 8, models=("phi-3-mini", "llama-2-7b"),
                 jobs: int = 20, arrival_rate_per_hour: float = 4.0, tokens=(2e9, 4e10), trace=None,
                 global_batch: int = 512, seq: int = 2048, failures_per_day: float = FAILURES_PER_NODE_DAY,
                 storage: str | None = None, restart_minutes: float | None = None, interval_s: float = 900.0,
                 queue_slots: int = 8, running_slots: int = 8, max_steps: int = 10_000,
                 reward_weights: dict | None = None):
        self.weights = parse_weights(reward_weights)
        self.system = load_system(system, flag="system")
        self.N = int(check_number(nodes, "nodes", whole=True, high=MAX_NODES))
        for key, value in (("global_batch", global_batch), ("seq", seq), ("queue_slots", queue_slots),
                           ("running_slots", running_slots), ("max_steps", max_steps)):
            check_number(value, key, whole=True, high=10_000_000)
        self.interval_s = check_number(interval_s, "interval_s", high=1e7)
        fails = check_number(failures_per_day, "failures_per_day", zero=True, high=1e5)
        self.resilience = resilience_from(None, None, None, storage, restart_minutes,
                                          keys={"storage": "storage", "restart": "restart_minutes"})
        if trace is not None:
            self.trace = read_trace(trace)
            names, where = sorted({j.model for j in self.trace}), "trace"
        else:
            self.trace = None
            self.stream = check_stream(models, jobs, arrival_rate_per_hour, tokens)
            names, where = self.stream[0], "models"
        self.costs = {}
        for name in names:
            try:
                self.costs[name] = JobCosts(name, self.system, int(global_batch), int(seq), self.N,
                                            self.resilience, fails)
            except StudyError as exc:
                raise StudyError(exc.detail, key=where if exc.key == "models" else exc.key) from None
        self.W, self.R, self.max_steps = int(queue_slots), int(running_slots), int(max_steps)
        self.possible_agents = [f"node_{i}" for i in range(self.N)]
        self.agents: list[str] = []
        self.n_actions = 2 + self.W + self.R
        self.obs_size = CLUSTER + QUEUE * self.W + RUNNING * self.R + 2 + self.R
        self._obs_space = spaces.Dict({
            "observation": spaces.Box(0.0, 1e6, (self.obs_size,), np.float32),
            "action_mask": spaces.Box(0, 1, (self.n_actions,), np.int8)})
        self._act_space = spaces.Discrete(self.n_actions)
        limit = self.system.chiplet.power_limit_w
        self.reference_w = limit if limit > 0 else max(
            c.rate(c.shape.min_nodes).power_w / (c.shape.min_nodes * self.system.gpus_per_node)
            for c in self.costs.values())
        self.np_random, _ = seeding.np_random(None)
        self.sim: ClusterSim | None = None
        self.steps = 0

    # --- PettingZoo's interface --------------------------------------------------------------------
    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return self._obs_space

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return self._act_space

    def reset(self, seed: int | None = None, options=None):
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        jobs = self.trace if self.trace is not None else poisson_jobs(*self.stream, rng=self.np_random)
        self.sim = ClusterSim(jobs, self.costs, self.N, self.system.gpus_per_node, self.interval_s, self.W, self.R)
        self.total_priority = float(sum(j.priority for j in jobs))
        self.agents = list(self.possible_agents)
        self.steps = 0
        obs, masks = self.observe()
        return obs, {a: {"action_mask": masks[i], "dropped": False} for i, a in enumerate(self.agents)}

    def step(self, actions: dict):
        a = np.zeros(self.N, np.int64)
        for i, agent in enumerate(self.possible_agents):
            if agent in actions:
                a[i] = int(actions[agent])
        a[(a < 0) | (a >= self.n_actions)] = -1
        invalid = a < 0
        a[invalid] = 0
        dropped = self.sim.apply(a) | invalid
        terms = step_terms(self.sim.advance(), self.total_priority, self.N * self.system.gpus_per_node,
                           self.reference_w, self.interval_s)
        r = reward(terms, self.weights)
        self.steps += 1
        done, cut = self.sim.finished, self.steps >= self.max_steps
        obs, masks = self.observe()
        agents = self.agents
        infos = {x: {"action_mask": masks[i], "dropped": bool(dropped[i]), "terms": terms}
                 for i, x in enumerate(agents)}
        if done or cut:
            metrics = self.sim.metrics()
            for x in agents:
                infos[x]["metrics"] = metrics
            self.agents = []
        return (obs, {x: r for x in agents}, {x: done for x in agents}, {x: cut and not done for x in agents}, infos)

    def action_mask(self, agent: str) -> np.ndarray:
        return self.sim.masks()[self.possible_agents.index(agent)]

    def state(self) -> np.ndarray:
        """The cluster's features shared by every agent (observation without the agent's own part)."""
        return self._shared()

    # --- observations ------------------------------------------------------------------------------
    def _shared(self) -> np.ndarray:
        sim, day = self.sim, 86_400.0
        g = np.zeros(CLUSTER + QUEUE * self.W + RUNNING * self.R, np.float32)
        g[:CLUSTER] = ((sim.node_job < 0).mean(), len(sim.queue) / self.W, len(sim.running) / self.R,
                       sim.now / day)
        at = CLUSTER
        for j in sim.queue[:self.W]:
            n = int(sim.start_nodes[j])
            g[at:at + QUEUE] = (1.0, self.hours_left(j, n) / 24, sim.priority[j] / 4, n / self.N,
                                (sim.now - sim.arrival[j]) / day, sim.attained[j] / 3600 / (sim.gpn * 24))
            at += QUEUE
        at = CLUSTER + QUEUE * self.W
        for j in sim.running[:self.R]:
            c, n = sim.cost_of[j], int(sim.nodes_of[j])
            more = n + c.shape.unit
            gain = c.rate(more).tokens_per_s / c.rate(n).tokens_per_s - 1.0 if c.allowed(more) else 0.0
            g[at:at + RUNNING] = (1.0, n / self.N, self.hours_left(j, n) / 24, gain, sim.stall_s[j] / self.interval_s,
                                  sim.priority[j] / 4)
            at += RUNNING
        return g

    def hours_left(self, j: int, n: int) -> float:
        """Hours job ``j`` needs to finish at ``n`` nodes (its rate times its kept fraction; 1e5 if none)."""
        c = self.sim.cost_of[j]
        speed = c.rate(n).tokens_per_s * c.plan(n).kept_frac
        return min(self.sim.remaining[j] / speed / 3600, 1e5) if speed > 0 else 1e5

    def observe(self):
        """({agent: {"observation", "action_mask"}}, masks [N, actions]) of the live agents now."""
        sim = self.sim
        shared = self._shared()
        own = np.zeros((self.N, 2 + self.R), np.float32)
        job = sim.node_job
        own[:, 0] = job < 0
        slot = {j: r for r, j in enumerate(sim.running[:self.R])}
        for i in np.flatnonzero(job >= 0):
            j = int(job[i])
            own[i, 1] = sim.nodes_of[j] / self.N
            if j in slot:
                own[i, 2 + slot[j]] = 1.0
        obs = np.concatenate([np.broadcast_to(shared, (self.N, shared.size)), own], axis=1)
        masks = sim.masks()
        return {a: {"observation": obs[i], "action_mask": masks[i]} for i, a in enumerate(self.agents)}, masks

    def metrics(self) -> dict:
        return self.sim.metrics()
