"""The failure pass's copy-cost memo (dse.model.failures) gives the bits of costing every copy afresh."""
import numpy as np
import pytest

import dse
from dse.model.kernel_tables import cost_classes
from dse.search.screening import screened


def test_cost_classes_split_on_any_bit_of_a_unit_or_its_operators():
    op_ptr = np.array([0, 2, 4, 6, 7])
    op_time = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [3.0, np.nextafter(4.0, 5)],
                        [1.0, 2.0]])
    w_ratio = np.ones((4, 3))
    expert = np.array([True, True, True, True])
    assert list(cost_classes(op_ptr, (op_time,), (w_ratio, expert))) == [0, 0, 1, 2]
    expert[1] = False
    assert list(cost_classes(op_ptr, (op_time,), (w_ratio, expert))) == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study("tests/data/moe_small.yaml"))


def without_memo(W):
    """The workspace with no room in the memo: every copy costed afresh (the path before the memo)."""
    C, _, copies = W.memo_t.shape
    return W._replace(memo_t=np.zeros((C, 0, copies)), memo_d=np.zeros((C, 0, copies)),
                      memo_stamp=np.zeros((C, 0, copies), np.int64))


@pytest.mark.parametrize("screen", [False, True], ids=["exact", "screened"])
def test_memo_gives_the_same_bits_as_costing_each_copy(prepared, screen):
    """Memo against none over 40 random designs whose failures re-place spilling chiplets: in the exact pass,
    about 13,000 moved copies land wholly in HBM on such a chiplet and read the memo (issue 52, eighteenth
    round; counted with a scratch copy of the failure pass)."""
    ev, space = prepared.package_evaluator, prepared.space
    T = ev.kernel
    assert T.unit_cost_class.max() + 1 < len(T.unit_cost_class)          # units share classes here
    X = np.random.default_rng(3).integers(space.lower, space.upper + 1, size=(40, space.n_var))
    d = ev.decode(X)
    W, W2 = ev.workspace(ev.max_copies), ev.workspace(ev.max_copies)
    with screened(ev, screen):
        memo = ev._kernel(d, True, (W, W2))
        plain = ev._kernel(d, True, (without_memo(W), W2))
    assert W.memo_calls[0] > 0 and (W.memo_stamp > 0).any()               # the memo was filled
    assert np.isfinite(memo[:, list(ev.columns).index("fault_tolerance_frac")]).all()
    assert np.array_equal(memo, plain, equal_nan=True)

