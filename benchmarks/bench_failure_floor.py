"""Lower bound of the time exact fault tolerance needs on issue 7's benchmark, whatever the code around it.

Re-evaluating each of the 16 single failures of a Mixtral-8x7B per-layer design exactly means, per
failure (counts measured on the benchmark's random designs): taking ~225 old routes off the link loads
and putting ~200 new ones on (2.5 links each on a 4 x 4 mesh), copying the ~38 touched load rows of
48 links and finding each one's busiest link. This script does only that arithmetic, on XY routes with
synthetic pairs and amounts, and prints microseconds per design: add the intact evaluation
(`bench_evaluate.py` without failures) to get the least a design can cost.
"""
import time

import numba as nb
import numpy as np

DESIGNS, FAILURES, ROWS, LINKS, WALKS, TOUCHED = 2000, 16, 66, 48, 425, 38


def xy_routes(k: int = 4):
    """CSR routes of every ordered pair of a k x k mesh under XY routing (channel ids < LINKS)."""
    ptr, links = [0], []
    for a in range(k * k):
        for b in range(k * k):
            (ya, xa), (yb, xb) = divmod(a, k), divmod(b, k)
            while xa != xb:
                step = 1 if xb > xa else -1
                links.append(((ya * k + xa) * 4 + (0 if step > 0 else 1)) % LINKS)
                xa += step
            while ya != yb:
                step = 1 if yb > ya else -1
                links.append(((ya * k + xa) * 4 + (2 if step > 0 else 3)) % LINKS)
                ya += step
            ptr.append(len(links))
    return np.array(ptr), np.array(links)


@nb.njit
def failures_arithmetic(ptr, links, pairs, rows, amounts, loads, scratch):
    total = 0.0
    for d in range(DESIGNS):
        for f in range(FAILURES):
            for r in range(TOUCHED):
                for link in range(LINKS):
                    scratch[r, link] = loads[r, link]
            for w in range(WALKS):
                p, r, a = pairs[d % 4, f, w], rows[d % 4, f, w], amounts[d % 4, f, w]
                for x in range(ptr[p], ptr[p + 1]):
                    scratch[r, links[x]] += a
            for r in range(TOUCHED):
                busiest = 0.0
                for link in range(LINKS):
                    busiest = max(busiest, scratch[r, link])
                total += busiest
    return total


def main() -> None:
    rng = np.random.default_rng(0)
    ptr, links = xy_routes()
    pairs = rng.integers(0, 256, size=(4, FAILURES, WALKS))
    rows = rng.integers(0, TOUCHED, size=(4, FAILURES, WALKS))
    amounts = rng.random((4, FAILURES, WALKS))
    loads, scratch = rng.random((ROWS, LINKS)), np.zeros((ROWS, LINKS))
    failures_arithmetic(ptr, links, pairs, rows, amounts, loads, scratch)
    best = np.inf
    for _ in range(3):
        start = time.process_time()
        failures_arithmetic(ptr, links, pairs, rows, amounts, loads, scratch)
        best = min(best, time.process_time() - start)
    print(f"link-load arithmetic of 16 exact single failures: {best / DESIGNS * 1e6:.1f} us per design")


if __name__ == "__main__":
    main()
