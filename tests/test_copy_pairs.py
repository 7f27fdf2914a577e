"""dse.model.hand_offs.next_copy_pair steps an edge's (sending copy, receiving copy) pairs in one loop in the order
of the nested loops it replaced (sending copies outer, receiving copies inner), so every link's subtractions and
additions keep their order and their bits (issue 52, fourteenth round)."""
import numba as nb
import numpy as np

from dse.model.hand_offs import next_copy_pair


@nb.njit
def flat_pairs(ca, cb):
    out = np.empty((ca * cb, 2), np.int64)
    ra = 0
    rb = 0
    for k in range(ca * cb):
        out[k, 0], out[k, 1] = ra, rb
        ra, rb = next_copy_pair(ra, rb, cb)
    return out


def test_one_loop_gives_the_nested_loops_order():
    for ca in range(1, 6):
        for cb in range(1, 6):
            nested = [(ra, rb) for ra in range(ca) for rb in range(cb)]
            assert flat_pairs(ca, cb).tolist() == [list(pair) for pair in nested], (ca, cb)
