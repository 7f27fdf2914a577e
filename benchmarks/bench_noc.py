"""Rate of link-load evaluation on a 4 x 4 (16-chiplet) mesh; prints traffic matrices per second last.

Three paths to the same loads: one sparse product per batch of matrices (Routes.link_loads), the Numba
CSR walk per matrix (route_link_loads, what an evaluator kernel does), and the route bank build for a
study's shapes (1..8 x 1..8 meshes).
"""
import time

import numpy as np

import noc


def rate(fn, count: int, repeat: int = 3) -> float:
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return count / best


def main() -> None:
    t = noc.mesh(4, 4)
    r = noc.route(t, "xy")
    rng = np.random.default_rng(0)
    batch = rng.random((20000, t.n, t.n))
    r.link_loads(batch[:2])
    noc.route_link_loads(r.route_ptr, r.route_links, batch[0], t.n_links)      # compile / load cache

    sparse = rate(lambda: r.link_loads(batch), len(batch))

    def numba_loop():
        for m in batch:
            noc.route_link_loads(r.route_ptr, r.route_links, m, t.n_links)
    numba = rate(numba_loop, len(batch), repeat=1)

    shapes = [(a, b) for a in range(1, 9) for b in range(1, 9)]
    start = time.perf_counter()
    noc.route_bank([noc.mesh(a, b) for a, b in shapes], "xy")
    bank_s = time.perf_counter() - start

    print(f"route bank for {len(shapes)} mesh shapes (1..8 x 1..8): {bank_s * 1e3:.0f} ms")
    print(f"numba CSR walk, one matrix per call: {numba:,.0f} traffic matrices/s")
    print(f"16-chiplet mesh link loads (sparse product, batches of {len(batch)}): {sparse:,.0f} traffic matrices/s")


if __name__ == "__main__":
    main()
