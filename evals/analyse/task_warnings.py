"""Warnings about tasks that cannot show what the gate asks of them: a floor (both arms at
0: no drop can be seen), a ceiling (both at 1: no gain can be seen) and a classifier that
predicts one label for every item (accuracy then measures the label mix, not the model)."""

from __future__ import annotations

from evals.analyse.task_analysis import TaskAnalysis


def task_warnings(analyses: list[TaskAnalysis]) -> list[str]:
    warnings = []
    for a in analyses:
        if a.baseline_mean == 0 and a.candidate_mean == 0:
            warnings.append(f"task {a.task}: both arms score 0 on every item (floor); it cannot "
                            "detect a drop, so its PASS says nothing about the candidate")
        elif a.binary and a.baseline_mean == 1 and a.candidate_mean == 1:
            warnings.append(f"task {a.task}: both arms score 1 on every item (ceiling); it "
                            "can show a drop but no gain")
        if a.labels is not None:
            for arm, shares in (("baseline", a.labels.predicted_share_baseline),
                                ("candidate", a.labels.predicted_share_candidate)):
                top = max(range(len(shares)), key=shares.__getitem__)
                if shares[top] >= 1.0:
                    warnings.append(f"task {a.task}: the {arm} predicts "
                                    f"`{a.labels.categories[top]}` for every item (a constant "
                                    "classifier)")
    return warnings
