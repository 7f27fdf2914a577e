"""The cluster a scheduler drives: nodes, jobs waiting and running, time advancing in fixed intervals.

Every ``interval_s`` of simulated time each node (an agent) acts once, then the cluster runs the
interval. Actions (one `Discrete` space, ``1 + queue_slots + running_slots + 1`` values):

* ``0`` keep: nothing changes;
* ``1 + w`` take the w-th waiting job (arrival order; preempted jobs wait again): an idle node starts it
  on the nodes it asks for (at least its minimum, in whole units: dse.rl.cluster_costs), itself and the
  lowest-numbered other idle nodes;
* ``1 + W + r`` join the r-th running job (order of starting): an idle node grows the job's data-parallel
  degree by one unit of nodes;
* ``1 + W + R`` leave: a busy node shrinks its job by one unit, or, at the job's minimum, preempts it
  (every node freed, the job back in the queue with its progress).

Masks allow exactly the actions valid before the step; the nodes act in index order, and an action an
earlier node's made invalid (the job already started, the node pulled into another's start) is dropped
(``infos[agent]["dropped"]``). A job re-sharded in a step (grown, shrunk) stops for its checkpoint write
at the old size and its reload at the new one; a preempted job pays its write and the reload when it
starts again.

Running an interval: a job first sits out what is left of its stop, then trains at its tokens per second
(dse.training.iteration at its degrees) times the kept fraction of wall time the resilience model leaves
(failures per day per node, Daly's checkpoint interval: dse.training.resilience) until its tokens are
done. Power: a training job draws its iteration's average power over the share of wall time it runs
iterations and idle power otherwise; a stopped job's and an idle node's devices draw idle power
(arch.idle_power_w). Failures are taken in expectation (the renewal-reward model's fraction of wall time
lost to rework and restarts), so a seeded stream gives one answer. SI units inside.
"""
from __future__ import annotations

import math

import numpy as np

from .cluster_costs import JobCosts
from .cluster_jobs import Job

KEEP = 0


class ClusterSim:
    """State of one episode (module docstring)."""

    def __init__(self, jobs: list[Job], costs: dict[str, JobCosts], nodes: int, gpus_per_node: int,
                 interval_s: float, queue_slots: int, running_slots: int):
        self.jobs, self.costs, self.N, self.gpn = jobs, costs, nodes, gpus_per_node
        self.interval_s, self.W, self.R = interval_s, queue_slots, running_slots
        self.n_actions = 2 + queue_slots + running_slots
        n = len(jobs)
        self.cost_of = [costs[j.model] for j in jobs]
        self.start_nodes = np.array([self._start_nodes(j, c, nodes) for j, c in zip(jobs, self.cost_of)])
        self.arrival = np.array([j.arrival_s for j in jobs])
        self.priority = np.array([j.priority for j in jobs])
        self.remaining = np.array([j.tokens for j in jobs])
        self.nodes_of = np.zeros(n, np.int64)         # nodes a job holds (0: not running)
        self.stall_s = np.zeros(n)                    # stop left before the job trains again
        self.pending_s = np.zeros(n)                  # a preempted job's checkpoint write, paid at its restart
        self.attained = np.zeros(n)                   # GPU-seconds held (Tiresias' attained service)
        self.done_s = np.full(n, np.nan)
        self.node_job = np.full(nodes, -1, np.int64)
        self.now = 0.0
        self.arrived = 0                              # jobs arrived so far (they arrive in order)
        self.queue: list[int] = []
        self.running: list[int] = []
        self.totals = dict(energy_j=0.0, tokens=0.0, mfu_device_s=0.0, failure_gpu_s=0.0, reshard_s=0.0)
        self._arrive(0.0)

    @staticmethod
    def _start_nodes(job: Job, c: JobCosts, cluster: int) -> int:
        """The nodes a take starts a job on: what it asks for, within its range and the cluster, in units."""
        sh = c.shape
        n = min(max(job.nodes, sh.min_nodes), sh.max_nodes, cluster // sh.unit * sh.unit)
        n = max(sh.min_nodes, -(-n // sh.unit) * sh.unit)
        while n > sh.min_nodes and not c.allowed(n):
            n -= sh.unit
        return n

    # --- the decisions ---------------------------------------------------------------------------
    def valid(self) -> tuple[np.ndarray, np.ndarray]:
        """(take [W], join [R]): which queue and running slots an idle node may act on now."""
        idle = int((self.node_job < 0).sum())
        take = np.zeros(self.W, bool)
        for w, j in enumerate(self.queue[:self.W]):
            take[w] = self.start_nodes[j] <= idle
        join = np.zeros(self.R, bool)
        for r, j in enumerate(self.running[:self.R]):
            c = self.cost_of[j]
            u = c.shape.unit
            join[r] = u <= idle and c.allowed(int(self.nodes_of[j]) + u)
        return take, join

    def masks(self) -> np.ndarray:
        """[N, actions] int8: the actions each node may take (module docstring)."""
        take, join = self.valid()
        idle = self.node_job < 0
        m = np.zeros((self.N, self.n_actions), np.int8)
        m[:, KEEP] = 1
        m[idle, 1:1 + self.W] = take
        m[idle, 1 + self.W:1 + self.W + self.R] = join
        m[~idle, -1] = 1
        return m

    def apply(self, actions: np.ndarray) -> np.ndarray:
        """Apply each node's action in index order, the slots those of the queue and running jobs before
        the step; returns which were dropped (module docstring)."""
        self.begin()
        queue, running = self.queue[:self.W], self.running[:self.R]
        dropped = np.zeros(self.N, bool)
        for i in np.flatnonzero(actions):
            dropped[i] = not self.act(int(i), int(actions[i]), queue, running)
        self.end()
        return dropped

    def begin(self) -> None:
        """Start a round of actions: remember each running job's nodes (re-sharding is priced at `end`)."""
        self._before = {j: int(self.nodes_of[j]) for j in self.running}
        self._started: set[int] = set()

    def act(self, i: int, a: int, queue: list[int], running: list[int]) -> bool:
        """Node ``i``'s action ``a`` on the slots of ``queue`` and ``running``; whether it was applied."""
        if 1 <= a <= self.W:
            ok = a - 1 < len(queue) and self._take(i, queue[a - 1])
            if ok:
                self._started.add(queue[a - 1])
            return ok
        if self.W < a <= self.W + self.R:
            return a - 1 - self.W < len(running) and self._join(i, running[a - 1 - self.W])
        if a == self.n_actions - 1:
            return self._leave(i)
        return a == KEEP

    def end(self) -> None:
        """End the round: a job whose nodes changed stops for its checkpoint write and reload."""
        for j, old in self._before.items():
            new = int(self.nodes_of[j])
            if 0 < new != old and j not in self._started:
                c = self.cost_of[j]
                stop = c.plan(old).write_s + c.plan(new).reload_s
                self.stall_s[j] += stop
                self.totals["reshard_s"] += stop

    def _grab(self, i: int, j: int, count: int) -> bool:
        idle = np.flatnonzero(self.node_job < 0)
        if self.node_job[i] >= 0 or len(idle) < count:
            return False
        others = idle[idle != i][:count - 1]
        self.node_job[i] = j
        self.node_job[others] = j
        self.nodes_of[j] += count
        return True

    def _take(self, i: int, j: int) -> bool:
        if j not in self.queue or not self._grab(i, j, int(self.start_nodes[j])):
            return False
        self.queue.remove(j)
        self.running.append(j)
        n = int(self.nodes_of[j])
        if self.pending_s[j] > 0 or self.remaining[j] < self.jobs[j].tokens:     # resumed: reload
            self.stall_s[j] = self.pending_s[j] + self.cost_of[j].plan(n).reload_s
            self.totals["reshard_s"] += self.stall_s[j]
        self.pending_s[j] = 0.0
        return True

    def _join(self, i: int, j: int) -> bool:
        c = self.cost_of[j]
        u = c.shape.unit
        if self.nodes_of[j] == 0 or not c.allowed(int(self.nodes_of[j]) + u):
            return False
        return self._grab(i, j, u)

    def _leave(self, i: int) -> bool:
        j = int(self.node_job[i])
        if j < 0:
            return False
        c = self.cost_of[j]
        n = int(self.nodes_of[j])
        mine = np.flatnonzero(self.node_job == j)
        if n - c.shape.unit >= c.shape.min_nodes and c.allowed(n - c.shape.unit):
            leaving = np.r_[i, mine[mine != i][::-1][:c.shape.unit - 1]]
            self.node_job[leaving] = -1
            self.nodes_of[j] -= len(leaving)
            return True
        self.node_job[mine] = -1           # preempted: back to the queue, its checkpoint written
        self.nodes_of[j] = 0
        self.pending_s[j] = c.plan(n).write_s
        self.stall_s[j] = 0.0
        self.running.remove(j)
        self.queue.append(j)
        self.queue.sort()
        return True

    # --- the interval ----------------------------------------------------------------------------
    def advance(self) -> dict:
        """Run one interval; returns its priority-weighted job-seconds in the system, energy (J) and
        MFU device-seconds."""
        t0, dt = self.now, self.interval_s
        t1 = t0 + dt
        energy = 0.0
        mfu_s = 0.0
        finished = []
        for j in self.running:
            c, n = self.cost_of[j], int(self.nodes_of[j])
            rate, plan = c.rate(n), c.plan(n)
            stop = min(self.stall_s[j], dt)
            self.stall_s[j] -= stop
            speed = rate.tokens_per_s * plan.kept_frac
            run = dt - stop
            if speed > 0 and self.remaining[j] <= speed * run:
                run = self.remaining[j] / speed
                self.done_s[j] = t0 + stop + run
                finished.append(j)
            trained = min(self.remaining[j], speed * run)
            self.remaining[j] -= trained
            self.totals["tokens"] += trained
            devices = n * self.gpn
            energy += (rate.power_w * plan.compute_frac + c.idle_w * n * (1.0 - plan.compute_frac)) * run
            energy += c.idle_w * n * (dt - run)          # stopped, or done before the interval's end
            mfu_s += rate.mfu * devices * plan.kept_frac * run
            self.totals["failure_gpu_s"] += plan.failure_frac * run * devices
            self.attained[j] += devices * (stop + run)
        idle = int((self.node_job < 0).sum())
        if self.cost_of:
            energy += self.cost_of[0].idle_w * idle * dt
        for j in finished:
            self.running.remove(j)
            self.node_job[self.node_job == j] = -1
            self.nodes_of[j] = 0
        # weighted time in the system: arrived before t1, not done before t0
        arrived = self.arrival[:self._arrivals_until(t1)]
        end = np.where(np.isnan(self.done_s[:len(arrived)]), t1, self.done_s[:len(arrived)])
        overlap = np.clip(np.minimum(end, t1) - np.maximum(arrived, t0), 0.0, None)
        in_system = float((self.priority[:len(arrived)] * overlap).sum())
        self.now = t1
        self._arrive(t1)
        self.totals["energy_j"] += energy
        self.totals["mfu_device_s"] += mfu_s
        return dict(in_system_s=in_system, energy_j=energy, mfu_device_s=mfu_s)

    def _arrivals_until(self, t: float) -> int:
        return int(np.searchsorted(self.arrival, t, side="right"))

    def _arrive(self, t: float) -> None:
        k = self._arrivals_until(t)
        self.queue += list(range(self.arrived, k))
        self.arrived = k

    @property
    def finished(self) -> bool:
        return bool(np.all(np.isfinite(self.done_s)))

    def metrics(self) -> dict:
        """The episode's figures so far: mean job completion time (h, of the jobs done), utilisation (the
        cluster's MFU over the makespan), energy per token trained (J), GPU-hours lost to failures."""
        done = np.isfinite(self.done_s)
        jct = (self.done_s - self.arrival)[done]
        span = float(np.nanmax(self.done_s)) if done.any() else self.now
        devices = self.N * self.gpn
        t = self.totals
        return {"jobs_done": int(done.sum()), "mean_jct_h": float(jct.mean() / 3600) if done.any() else math.nan,
                "weighted_jct_h": float((jct * self.priority[done]).sum() / self.priority[done].sum() / 3600)
                if done.any() else math.nan,
                "makespan_h": span / 3600, "utilisation": t["mfu_device_s"] / (devices * span) if span > 0 else 0.0,
                "energy_j_per_token": t["energy_j"] / t["tokens"] if t["tokens"] > 0 else math.nan,
                "gpu_hours_lost_to_failures": t["failure_gpu_s"] / 3600, "tokens": t["tokens"],
                "energy_j": t["energy_j"], "reshard_s": t["reshard_s"]}
