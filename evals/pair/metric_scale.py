"""The gating metric's scale and kind, checked before any statistic sees it.

lm-eval metrics come on a 0-1 scale (accuracy) or, for some tasks, 0-100. The gate works
in accuracy units (a margin of 0.02 is 2 points on either scale), so values are divided by
the task's scale: declared in the config (`scale: 100`) or detected (every value within
[0, 1]: 1; within [0, 100]: 100). A declared scale that the values exceed is bad input.

The kind decides the tests: 0/1 values get McNemar and Tango, anything else paired
t-tests. A task whose values are 0/1 except on a few items is almost always a broken
metric or a mixed-up field, so it is an error naming the first odd item unless the config
says `metric_type: continuous`; it never switches tests silently.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from evals.errors import UserError
from evals.pair.pairing import PairedTask, pair_task
from evals.pair.samples import ArmSamples

MOSTLY_BINARY = 0.95
"""A task with at least this share of 0/1 values but not all is "mixed", hence an error."""


def _first_odd(paired: PairedTask, odd) -> str:
    for doc_id, b, c in zip(paired.doc_ids, paired.baseline, paired.candidate):
        if odd(b) or odd(c):
            return f"doc_id {doc_id} (baseline {b:g}, candidate {c:g})"
    return "no item"


def normalise_metric(paired: PairedTask, *, scale: float | None = None,
                     metric_type: str = "auto", where: str = "") -> PairedTask:
    """Values in accuracy units and the binary/continuous decision, or a UserError."""
    at = f"{where}: task `{paired.task}` metric `{paired.metric}`"
    values = np.concatenate([paired.baseline, paired.candidate])
    if not np.all(np.isfinite(values)):
        raise UserError(f"{at} has a value that is not a finite number at "
                        f"{_first_odd(paired, lambda v: not np.isfinite(v))}.")
    top = float(np.max(np.abs(values))) if values.size else 0.0
    raw01 = (values == 0) | (values == 1)
    if scale is None and metric_type != "continuous" and not raw01.all() \
            and raw01.mean() >= MOSTLY_BINARY:
        scale = 1.0  # a 0/1 task with a few stray values (7.0, -1.0): named below, not rescaled
    if scale is None:
        if top <= 1.0:
            scale = 1.0
        elif top <= 100.0:
            scale = 100.0
        else:
            raise UserError(f"{at} reaches {top:g}, beyond a 0-1 or 0-100 scale; declare its "
                            "`scale:` in the config's task entry.")
    elif top > scale * (1 + 1e-9) and not (raw01.mean() >= MOSTLY_BINARY and scale == 1.0):
        raise UserError(f"{at} is declared on a 0-{scale:g} scale but reaches {top:g} at "
                        f"{_first_odd(paired, lambda v: abs(v) > scale)}; fix `scale`.")
    base, cand = paired.baseline / scale, paired.candidate / scale
    both = np.concatenate([base, cand])
    is01 = (both == 0) | (both == 1)
    if metric_type == "continuous":
        binary = False
    elif is01.all():
        binary = True
    elif metric_type == "binary" or is01.mean() >= MOSTLY_BINARY:
        odd = _first_odd(replace(paired, baseline=base, candidate=cand),
                         lambda v: v not in (0.0, 1.0))
        share = f"{int((~is01).sum())} of {both.size} values"
        raise UserError(f"{at} is 0/1 except on {share}, first at {odd}; set `metric_type: "
                        "continuous` in its task entry to compare it with paired t-tests, or "
                        "fix the metric.")
    else:
        binary = False
    return replace(paired, baseline=base, candidate=cand, binary=binary)


def pair_normalised(spec, first: ArmSamples, second: ArmSamples, filter_name, where: str,
                    **kwargs) -> PairedTask:
    """Two arms' items of one task (`spec`: its TaskSpec), on the accuracy scale."""
    return normalise_metric(pair_task(first, second, spec.name, spec.metric, filter_name,
                                      **kwargs),
                            scale=spec.scale, metric_type=spec.metric_type, where=where)

