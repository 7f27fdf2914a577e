"""The closed form of continuous batching and of chunked prefill, over arrays of designs (Numba): the
serving objectives' model (docs/serving_closed_form.md follows one request rate through it).

One entry point per scheduler returns a structured array of `FIELDS` (p99 and mean TTFT and TPOT, goodput,
max rate at SLO, saturation rate, sequences in flight), one record per design:

* `continuous_batching` (continuous.py: the model), from the decode interval's fixed point
  (fixed_point.py), the wait for a batch slot (slot_queue.py), TTFT (ttft.py), TPOT (tpot.py);
* `chunked_prefill` (chunked.py: the model), from its iteration's fixed point (chunk_interval.py), the
  token backlog as an M/D/1 queue (token_backlog.py), TTFT in whole iterations (chunked_ttft.py), TPOT
  (tpot.py), the slot wait (slot_queue.py);
* both: the saturation rate (saturation.py), the max rate at SLO (slo_search.py), Poisson and normal
  tails and quantiles (tails.py), the named results (results.py).
"""
from .chunked import chunked_prefill
from .continuous import continuous_batching
from .results import FIELDS, RESULTS

__all__ = ["FIELDS", "RESULTS", "chunked_prefill", "continuous_batching"]
