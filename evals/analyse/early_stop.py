"""Opt-in sequential early stop: the seeded item order, the chunks, and the stop decision.

Both arms run a task's items in the same seeded random order, in chunks (one lm-eval
call per chunk). After each candidate chunk the items seen so far are paired with the
baseline's and `evals.stats.sequential_decision` looks at them; the candidate stops as
soon as a regression is established or non-inferiority is shown.

Error budget. The looks use the e-process tests of `evals.stats.sequential`, valid over
any number of looks. They get half of alpha, split evenly over the gated tasks
(Bonferroni: tasks stop independently); a task that reaches its full item set without
a decision is judged by the fixed-sample tests at the other half of alpha (the split:
evals.plan.schedule.look_alpha, final_alpha). So the chance of a false REGRESSION, and
per task of a false PASS, stays at most alpha.

The parent computes each look when the candidate's worker asks after a chunk (`Looks`,
the pipeline's answerer; the runner and the run stage import no analysis) and hands the
last look of each task to the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from evals import stats
from evals.pair.metric_scale import pair_normalised
from evals.pair.pairing import PairedTask
from evals.pair.samples import read_output_dir
from evals.plan.run_plan import RunPlan
from evals.plan.schedule import chunks, item_order  # noqa: F401  (chunks re-exported)
from evals.runner.asks import LOOK
from evals.runner.layout import ArmLayout

@dataclass(frozen=True, slots=True)
class SequentialSummary:
    """What the interim looks of one task decided, for the verdict and the report."""

    decision: str
    """'regression', 'non_inferior', or 'continue' (no boundary crossed; full set run)."""
    items_used: int
    n_items: int
    chunk: int
    looks: int
    alpha: float
    threshold: float
    log_evalue_regression: float
    log_evalue_noninferiority: float

    @property
    def stopped_early(self) -> bool:
        return self.decision != "continue"

    @property
    def pvalue_regression(self) -> float:
        """Anytime-valid p-value of the regression test: min(1, 1 / e-value)."""
        return float(min(1.0, np.exp(-self.log_evalue_regression)))


def sequential_for_task(paired: PairedTask, order: np.ndarray, *, chunk: int, alpha: float,
                        margin: float, n_items: int) -> SequentialSummary:
    """Looks at the paired items in run order, one look per finished chunk.

    `paired` holds the items the candidate ran (a prefix of `order`, whole chunks);
    `order` is the full seeded order of the task's `n_items` items."""
    if not paired.is_binary:
        raise ValueError(f"task `{paired.task}`: sequential early stop needs a 0/1 metric; "
                         f"`{paired.metric}` is not binary.")
    position = {int(doc): i for i, doc in enumerate(order)}
    ran = sorted(range(paired.n), key=lambda i: position[paired.doc_ids[i]])
    if [position[paired.doc_ids[i]] for i in ran] != list(range(paired.n)):
        raise ValueError(f"task `{paired.task}`: the candidate's items are not a prefix of the "
                         "seeded run order; the run directory mixes two schedules.")
    looks = [min(k, paired.n) for k in range(chunk, paired.n + chunk, chunk)]
    result = stats.sequential_decision(paired.baseline[ran], paired.candidate[ran],
                                       looks=sorted(set(looks)), margin=margin, alpha=alpha)
    last = result.looks[-1]
    return SequentialSummary(
        decision=result.decision, items_used=result.items_used, n_items=n_items, chunk=chunk,
        looks=len(result.looks), alpha=alpha, threshold=result.threshold,
        log_evalue_regression=last.log_evalue_regression,
        log_evalue_noninferiority=last.log_evalue_noninferiority)


def first_items(paired: PairedTask, order: np.ndarray, k: int) -> PairedTask:
    """The paired items among the first k of the run order (what a decision at k saw)."""
    if k >= paired.n:
        return paired
    position = {int(doc): i for i, doc in enumerate(order)}
    keep = [i for i in range(paired.n) if position[paired.doc_ids[i]] < k]
    return replace(paired, doc_ids=tuple(paired.doc_ids[i] for i in keep),
                   baseline=paired.baseline[keep], candidate=paired.candidate[keep],
                   baseline_records=tuple(paired.baseline_records[i] for i in keep)
                   if paired.baseline_records else (),
                   candidate_records=tuple(paired.candidate_records[i] for i in keep)
                   if paired.candidate_records else ())


class Looks:
    """The parent's answers to a sequential candidate's "stop now?" (evals.runner.asks):
    after each chunk, the items so far paired with the baseline's and the sequential test
    above. The pipeline hands it to the run stage as the candidate's answerer. Each task's
    last look is kept for the analysis, which so does not compute it again."""

    def __init__(self, plan: RunPlan):
        assert plan.looks is not None, "a plan without `sequential:` takes no looks"
        self.schedule, self.seed = plan.looks, plan.seed
        self.tasks = {t.name: t for t in plan.tasks}
        self.baseline_dir, self.candidate_dir = (
            ArmLayout(Path(plan.specs[arm].output_dir)).lm_eval_dir
            for arm in ("baseline", "candidate"))
        self.last: dict[str, SequentialSummary] = {}

    def __call__(self, question: dict) -> dict:
        if question["kind"] != LOOK:
            return {"go": True}
        task, n_items = question["task"], int(question["n_items"])
        spec = self.tasks[task]
        paired = pair_normalised(spec, read_output_dir(self.baseline_dir, [task]),
                       read_output_dir(self.candidate_dir, [task]), spec.filter,
                       str(self.candidate_dir), baseline_superset=True)
        try:
            summary = sequential_for_task(
                paired, item_order(n_items, self.seed, task), chunk=self.schedule.chunk,
                alpha=self.schedule.alpha, margin=self.schedule.margin, n_items=n_items)
        except ValueError as exc:  # e.g. a metric that is not 0/1
            return {"error": str(exc)}
        self.last[task] = summary
        return {"stop": summary.stopped_early, "decision": summary.decision,
                "items_used": summary.items_used}
