"""An independent reference for the exact one-sided McNemar test's power: every (B, C)
count of the multinomial (n; p_b, p_c, rest) is enumerated, and the test rejects when
P(Binomial(B + C, 1/2) >= B) <= level. Shared by the planner and canary tests."""

from __future__ import annotations

import numpy as np
from scipy import stats


def exact_mcnemar_power(n: int, p_down: float, p_up: float, level: float) -> float:
    b = np.arange(n + 1)[:, None]
    c = np.arange(n + 1)[None, :]
    bb, cc = np.broadcast_arrays(b, c)
    valid = bb + cc <= n
    bb, cc = bb[valid], cc[valid]
    log_pmf = stats.multinomial.logpmf(np.stack([bb, cc, n - bb - cc], axis=1), n,
                                       [p_down, p_up, 1 - p_down - p_up])
    reject = (bb + cc > 0) & (stats.binom.sf(bb - 1, bb + cc, 0.5) <= level)
    return float(np.exp(log_pmf[reject]).sum())
