"""Pairing sampled repeats: sample r of item i in the baseline with sample r of item i in
the candidate (issue 53, `repeats: k`; NeMo Evaluator's `nel compare` pairs the same way).

Reads each arm's `<arm>/repeats/<task>.json` (evals.runner.repeat_scores: every repeat's
answer and score) into `RepeatScores`, and aligns the two arms on the items of the task's
`PairedTask`, whose hashes already showed the arms saw the same documents and prompts.
Repeat r has the same per-request seed in both arms (evals.runner.sample_seeds), so an
A/A under sampling is paired sample by sample. Nothing is dropped silently: an item or a
repeat count that differs between the arms is an error naming both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from evals.errors import UserError
from evals.pair.pairing import PairedTask
from evals.schemas import REPEAT_SCORES


@dataclass(frozen=True, slots=True)
class RepeatScores:
    """One arm's repeats of one task: per doc_id, per filter, the k answers and scores."""

    source: str
    task: str
    repeats: int
    items: dict
    """doc_id -> {"responses": [k], "answers": {filter: [k]}, "scores": {filter: {metric: [k]}}}."""


@dataclass(frozen=True, slots=True)
class PairedRepeats:
    """Both arms' k samples per item of one task, aligned by item and repeat."""

    task: str
    metric: str
    filter: str
    doc_ids: tuple[int, ...]
    repeats: int
    baseline: np.ndarray
    """(n_items, k) scores of the baseline's samples."""
    candidate: np.ndarray
    baseline_answers: tuple[tuple[str, ...], ...]
    """Per item, the k answers the task's filter extracted (the distribution check's labels)."""
    candidate_answers: tuple[tuple[str, ...], ...]
    baseline_responses: tuple[tuple[str, ...], ...]
    candidate_responses: tuple[tuple[str, ...], ...]


def read_repeat_scores(path: Path) -> RepeatScores:
    record = REPEAT_SCORES.read(path)
    try:
        items = {int(item["doc_id"]): item for item in record["items"]}
        return RepeatScores(str(path), str(record["task"]), int(record["repeats"]), items)
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{path}: not a repeat-scores file (an item lacks doc_id, or the "
                        "file lacks task, repeats or items); rerun the arm with --fresh.") from None


def read_arm_repeats(arm_root: Path, tasks: list[str]) -> dict[str, RepeatScores]:
    """The repeat scores of each task that has them (`repeats: k` above 1)."""
    found = {}
    for task in tasks:
        path = Path(arm_root) / "repeats" / f"{task}.json"
        if path.exists():
            found[task] = read_repeat_scores(path)
    return found


def _column(scores: RepeatScores, doc_id: int, filter_name: str, metric: str, what: str,
            where: str) -> list:
    item = scores.items.get(doc_id)
    if item is None:
        raise UserError(f"{where}: task `{scores.task}` doc_id {doc_id} has no repeats in "
                        f"{scores.source}; both arms must sample the same items.")
    if what == "scores":
        values = item.get("scores", {}).get(filter_name, {}).get(metric)
    else:
        values = item.get(what, {}).get(filter_name) if what == "answers" else item.get(what)
    if values is None or len(values) != scores.repeats:
        raise UserError(f"{where}: task `{scores.task}` doc_id {doc_id}: {scores.source} holds "
                        f"no {scores.repeats} {what} for filter `{filter_name}` and metric "
                        f"`{metric}`; rerun the arm with --fresh.")
    return list(values)


def pair_repeats(paired: PairedTask, baseline: RepeatScores | None,
                 candidate: RepeatScores | None, where: str) -> PairedRepeats | None:
    """The arms' repeats on the items of `paired` (its metric and filter), or None when
    neither arm sampled repeats; one arm without them, or another k, is an error."""
    if baseline is None and candidate is None:
        return None
    if baseline is None or candidate is None:
        has = baseline or candidate
        raise UserError(f"{where}: task `{paired.task}`: only {has.source} holds repeats "
                        f"({has.repeats}); both arms must run the same `repeats`.")
    if baseline.repeats != candidate.repeats:
        raise UserError(f"{where}: task `{paired.task}`: {baseline.source} holds "
                        f"{baseline.repeats} repeats per item, {candidate.source} "
                        f"{candidate.repeats}; both arms must run the same `repeats`.")
    columns = {}
    for side, scores in (("baseline", baseline), ("candidate", candidate)):
        for what in ("scores", "answers", "responses"):
            columns[side, what] = [_column(scores, d, paired.filter, paired.metric, what, where)
                                   for d in paired.doc_ids]
    return PairedRepeats(
        task=paired.task, metric=paired.metric, filter=paired.filter, doc_ids=paired.doc_ids,
        repeats=baseline.repeats,
        baseline=np.asarray(columns["baseline", "scores"], dtype=float).reshape(
            paired.n, baseline.repeats),
        candidate=np.asarray(columns["candidate", "scores"], dtype=float).reshape(
            paired.n, baseline.repeats),
        baseline_answers=tuple(map(tuple, columns["baseline", "answers"])),
        candidate_answers=tuple(map(tuple, columns["candidate", "answers"])),
        baseline_responses=tuple(map(tuple, columns["baseline", "responses"])),
        candidate_responses=tuple(map(tuple, columns["candidate", "responses"])))


def with_rates(paired: PairedTask, reps: PairedRepeats) -> PairedTask:
    """The task's paired items as the sampled analysis sees them: each item's value is its
    pass rate over the k repeats, its prediction the k extracted answers and its response
    the k responses, so paired_items.jsonl and the report's changed items show every
    sample of both arms (not lm-eval's one score per item)."""
    def records(side, answers, responses):
        return tuple(replace(record, prediction=" | ".join(answers[i]),
                             response="\n".join(f"[repeat {r}] {text}"
                                                for r, text in enumerate(responses[i])))
                     for i, record in enumerate(side))

    return replace(
        paired, baseline=reps.baseline.mean(axis=1), candidate=reps.candidate.mean(axis=1),
        binary=False,
        baseline_records=records(paired.baseline_records, reps.baseline_answers,
                                 reps.baseline_responses),
        candidate_records=records(paired.candidate_records, reps.candidate_answers,
                                  reps.candidate_responses))
