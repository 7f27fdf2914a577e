"""One number format per column of a results table (summary.md), as `dse run`'s terminal tables
(dse.cli.output.format_column) choose theirs."""
from __future__ import annotations

import numpy as np
import pandas as pd


def column_format(values: pd.Series) -> str:
    """A format spec for every number of a column: fixed point with the decimals that give its largest value
    three to four significant digits (at most 3), or 3-digit scientific when its nonzero values span more
    than 10^4 or all lie below 10^-3."""
    x = np.abs(pd.to_numeric(values, errors="coerce").to_numpy(float))
    x = x[np.isfinite(x) & (x > 0)]
    if not len(x):
        return ".0f"
    top = float(x.max())
    if top < 1e-3 or top / float(x.min()) > 1e4:
        return ".3e"
    return f",.{min(max(3 - int(np.floor(np.log10(top))), 0), 3)}f"
