"""The busiest link of a load row by an integer maximum over the products' bits (dse.model.hand_offs.busiest_link,
issue 52's thirteenth round): the same bits as the float compare chains it replaced (kept here as the reference),
on random rows with NaNs of either sign, infinities, -0.0, negative loads, subnormals, zero and infinite inverse
bandwidths, ties, rows of every length (0 included) and offsets into a longer row; the failure pass's and intact
pass's rows are checked whole by the evaluator's tests (metrics equal to a full re-evaluation)."""
import numba as nb
import numpy as np

from dse.model.hand_offs import busiest_link


@nb.njit(error_model="numpy")
def compare_chains(row, base, link_inv_bw, lb, n_links):
    """The twelfth round's `busiest_link`: four running float maxima from +0.0 over every fourth link, then theirs."""
    b0 = b1 = b2 = b3 = 0.0
    m = n_links - n_links % 4
    for link in range(0, m, 4):
        b0 = max(b0, row[base + link] * link_inv_bw[lb + link])
        b1 = max(b1, row[base + link + 1] * link_inv_bw[lb + link + 1])
        b2 = max(b2, row[base + link + 2] * link_inv_bw[lb + link + 2])
        b3 = max(b3, row[base + link + 3] * link_inv_bw[lb + link + 3])
    for link in range(m, n_links):
        b0 = max(b0, row[base + link] * link_inv_bw[lb + link])
    return max(max(b0, b1), max(b2, b3))


@nb.njit(error_model="numpy")
def both(rows, base, inv, lb, n_links, out):
    for k in range(base.shape[0]):
        out[k, 0] = compare_chains(rows, base[k], inv, lb[k], n_links[k])
        out[k, 1] = busiest_link(rows, base[k], inv, lb[k], n_links[k])


def check(rows, base, inv, lb, n_links):
    out = np.empty((len(base), 2))
    both(rows, base, inv, lb, n_links, out)
    assert np.array_equal(out[:, 0].view(np.int64), out[:, 1].view(np.int64)), out[out[:, 0].view(np.int64)
                                                                                   != out[:, 1].view(np.int64)]
    return out


def specials(rng, x, frac, values):
    hit = rng.random(x.shape) < frac
    x[hit] = rng.choice(values, int(hit.sum()))
    return x


def test_bits_give_the_compare_chains_bits_on_random_rows():
    rng = np.random.default_rng(52)
    neg_nan = -np.abs(np.float64(np.nan))
    pos_nan = np.abs(np.float64(np.nan))
    for trial in range(300):
        n = int(rng.integers(0, 70))
        lanes = n + 40
        rows = rng.exponential(1e6, 8 * lanes) if trial % 4 else rng.choice([0.0, -0.0, 1.0, 2.0, 5e-324], 8 * lanes)
        specials(rng, rows, [0.0, 0.02, 0.1][trial % 3],
                 [pos_nan, neg_nan, np.inf, -np.inf, -0.0, -1.0, 5e-324, -5e-324, 1e308])
        inv = rng.exponential(1e-9, lanes + 8) if trial % 5 else np.full(lanes + 8, 1e-9)
        specials(rng, inv, 0.05 if trial % 2 else 0.0, [0.0, np.inf, 1e-300, 1e300])
        k = 8
        base = rng.integers(0, 7 * lanes, k).astype(np.int64)
        lb = rng.integers(0, 8, k).astype(np.int64)
        n_links = np.minimum(rng.integers(0, n + 1, k), lanes).astype(np.int64)
        check(rows, base, inv, lb, n_links)


def test_all_below_zero_gives_plus_zero():
    rows = np.array([-1.0, -0.0, -np.inf, -np.abs(np.float64(np.nan)), np.abs(np.float64(np.nan)), 0.0])
    out = check(rows, np.zeros(1, np.int64), np.ones(6), np.zeros(1, np.int64), np.array([6]))
    assert out[0, 1] == 0.0 and np.signbit(out[0, 1]) == False  # noqa: E712
