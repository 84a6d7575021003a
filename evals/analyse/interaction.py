"""The interaction of two optimizations on one task, from a factorial study's paired items.

The four arms of a 2x2 cell (evals.plan.study.Cell) scored the same items: each non-baseline
arm was paired with the baseline item by item, so the baseline's values are y00 and each
arm's are y10, y01, y11, aligned by document. The test is the exact sign-flip test of the
mean item-level contrast y11 - y10 - y01 + y00 (evals.stats.interaction); its interval is
at the gate's level (1 - 2 alpha two-sided, as every interval of the run).

The interaction is a diagnosis, not a gate: it says *why* an arm regressed (the drop appears
only with the combination), while the verdicts come from each arm's comparison with the
baseline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from evals import stats
from evals.pair.pairing import PairedTask
from evals.stats.intervals import interval_level
from evals.plan.study import Cell, Study


@dataclass(frozen=True, slots=True)
class TaskInteraction:
    task: str
    first: str
    """`factor=level` of the first optimization; `second` likewise."""
    second: str
    arms: dict[str, str]
    """Role (neither, first_only, second_only, both) -> arm name."""
    n: int
    accuracy: dict[str, float]
    """Role -> the arm's mean on the task's accuracy scale."""
    contrast: float | None
    """Mean item-level interaction contrast; negative: the combination loses more than its
    parts add up to. None when the task's metric is not 0/1."""
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None
    """One-sided: the combination is worse than its parts add up to."""
    items_one: int
    items_two: int
    significant: bool
    sentence: str


ROLES = ("neither", "first_only", "second_only", "both")


def _points(x: float) -> str:
    return f"{x * 100:+.1f} pts"


def _aligned(pairs: dict[str, PairedTask]) -> tuple[list[int], dict[str, np.ndarray]]:
    """y00 from the first pairing's baseline, each role's candidate values, on the documents
    every pairing holds (all of them, unless a sequential arm stopped early)."""
    index = {role: {d: i for i, d in enumerate(p.doc_ids)} for role, p in pairs.items()}
    first_role = next(iter(pairs))
    first = pairs[first_role]
    docs = [d for d in first.doc_ids if all(d in ix for ix in index.values())]
    values = {"neither": np.array([first.baseline[index[first_role][d]] for d in docs])}
    for role, p in pairs.items():
        values[role] = np.array([p.candidate[index[role][d]] for d in docs])
    return docs, values


def task_interaction(cell: Cell, pairs: dict[str, PairedTask], *, alpha: float,
                     verdicts: dict[str, str]) -> TaskInteraction:
    """`pairs`: role (first_only, second_only, both) -> that arm's pairing with the baseline
    on this task; `verdicts`: arm -> its verdict on this task (for the sentence)."""
    task = next(iter(pairs.values())).task
    arms = {"neither": cell.neither, "first_only": cell.first_only,
            "second_only": cell.second_only, "both": cell.both}
    first, second = f"{cell.first}={cell.first_level}", f"{cell.second}={cell.second_level}"
    docs, y = _aligned(pairs)
    accuracy = {role: float(np.mean(y[role])) if len(docs) else float("nan") for role in ROLES}
    binary = all(p.is_binary for p in pairs.values())
    if not binary or len(docs) < 2:
        why = "its metric is not 0/1" if not binary else "fewer than two items are shared"
        return TaskInteraction(task, first, second, arms, len(docs), accuracy, None, None, None,
                               None, 0, 0, False, f"No interaction test on {task}: {why}.")
    result = stats.interaction_test(y["neither"], y["first_only"], y["second_only"], y["both"],
                                    alternative="less", confidence_level=interval_level(alpha))
    ci = result.confidence_interval()
    significant = result.pvalue < alpha
    deltas = {role: accuracy[role] - accuracy["neither"] for role in ROLES[1:]}
    parts = (f"{first} alone {_points(deltas['first_only'])}, {second} alone "
             f"{_points(deltas['second_only'])}, both {_points(deltas['both'])}")
    shown = (f"interaction {_points(result.statistic)} ({interval_level(alpha):.0%} interval "
             f"{_points(ci.low)} to {_points(ci.high)}, exact sign-flip p={result.pvalue:.3g})")
    singles_fine = all(verdicts.get(arms[r]) != "REGRESSION" for r in ("first_only", "second_only"))
    if significant and verdicts.get(arms["both"]) == "REGRESSION" and singles_fine:
        sentence = (f"On {task} the drop appears only with the combination: {parts}; {shown}. "
                    f"Neither {first} nor {second} alone regresses.")
    elif significant:
        sentence = (f"On {task} the combination loses more than its parts add up to: {parts}; "
                    f"{shown}.")
    else:
        sentence = (f"On {task} no interaction is shown: {parts}; {shown} is not below "
                    f"alpha={alpha:g}.")
    return TaskInteraction(task, first, second, arms, len(docs), accuracy, result.statistic,
                           ci.low, ci.high, result.pvalue, result.n_one, result.n_two,
                           significant, sentence)


def study_interactions(study: Study, paired: dict[str, list[PairedTask]],
                       verdicts: dict[str, dict[str, str]], alpha: float) -> list[dict]:
    """Each factorial cell's interaction on each task, for the cells whose three arms were
    analysed: `paired[arm]` is the arm's pairing with the baseline on each task,
    `verdicts[arm][task]` its verdict there."""
    out = []
    for cell in study.cells():
        roles = {"first_only": cell.first_only, "second_only": cell.second_only,
                 "both": cell.both}
        if not all(arm in paired for arm in roles.values()):
            continue
        for task in [t.name for t in study.settings.tasks]:
            pairs = {role: next(p for p in paired[arm] if p.task == task)
                     for role, arm in roles.items()}
            result = task_interaction(cell, pairs, alpha=alpha, verdicts={
                arm: verdicts.get(arm, {}).get(task) for arm in roles.values()})
            out.append(asdict(result))
    return out
