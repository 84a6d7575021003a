"""Aligning two arms item by item: (task, doc_id, filter), checked by doc, prompt and target
hashes.

Nothing is dropped silently: an item present in one arm only, or the same doc_id
with a different document, prompt or target, is an error naming the first such item.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evals.errors import UserError
from evals.pair.samples import ArmSamples, SampleRecord


@dataclass(frozen=True, slots=True)
class PairedTask:
    """Per-item values of one task's gating metric in both arms, aligned by index."""

    task: str
    metric: str
    filter: str
    doc_ids: tuple[int, ...]
    baseline: np.ndarray
    candidate: np.ndarray
    baseline_records: tuple[SampleRecord, ...]
    candidate_records: tuple[SampleRecord, ...]
    binary: bool | None = None
    """Set by evals.pair.metric_scale (declared or checked); None: decided from the values."""

    @property
    def n(self) -> int:
        return len(self.doc_ids)

    @property
    def is_binary(self) -> bool:
        if self.binary is not None:
            return self.binary
        values = np.concatenate([self.baseline, self.candidate])
        return bool(np.all((values == 0) | (values == 1)))


def _by_key(samples: ArmSamples, task: str) -> dict[tuple[str, int, str], SampleRecord]:
    return {r.key: r for r in samples.records if r.task == task}


def _choose_filter(task: str, wanted: str | None, b: dict, c: dict, where: str) -> str:
    filters = sorted({key[2] for key in b} & {key[2] for key in c})
    if wanted is not None:
        if wanted not in filters:
            raise UserError(f"{where}: task `{task}` has no filter `{wanted}` in both arms "
                            f"(available: {', '.join(filters) or 'none'}).")
        return wanted
    if not filters:
        raise UserError(f"{where}: task `{task}` has no filter present in both arms.")
    if len(filters) > 1:  # e.g. lm-eval's score-first beside maj@k: never picked silently
        raise UserError(f"{where}: task `{task}` is logged with several filters "
                        f"({', '.join(filters)}); name the one to gate on: `filter:` in the "
                        f"config's task, or `--metric {task}=METRIC,FILTER` for compare.")
    return filters[0]


def _check_repeats(task: str, b: list[SampleRecord], c: list[SampleRecord], b_source: str,
                   c_source: str) -> None:
    """Both arms logged the same number of responses per item (a task's `repeats`)."""
    kb, kc = (max((r.repeats for r in records), default=1) for records in (b, c))
    if kb != kc:
        raise UserError(f"task `{task}` was logged with {kb} repeat(s) per item in {b_source} "
                        f"and {kc} in {c_source}; compare runs made with the same `repeats`.")


def pair_task(baseline: ArmSamples, candidate: ArmSamples, task: str, metric: str,
              filter_name: str | None = None, *, baseline_superset: bool = False) -> PairedTask:
    """`baseline_superset`: the candidate ran a subset of the baseline's items (a
    sequential run that stopped early); baseline items it did not run are left out."""
    where = f"{baseline.source} vs {candidate.source}"
    b_all, c_all = _by_key(baseline, task), _by_key(candidate, task)
    if not b_all:
        raise UserError(f"{baseline.source}: no samples for task `{task}`.")
    if not c_all:
        raise UserError(f"{candidate.source}: no samples for task `{task}`.")
    chosen = _choose_filter(task, filter_name, b_all, c_all, where)
    b = {k: v for k, v in b_all.items() if k[2] == chosen}
    c = {k: v for k, v in c_all.items() if k[2] == chosen}
    if baseline_superset:
        b = {k: v for k, v in b.items() if k in c}
    only_b = sorted(set(b) - set(c))
    only_c = sorted(set(c) - set(b))
    if only_b or only_c:
        side, key = ("baseline", only_b[0]) if only_b else ("candidate", only_c[0])
        raise UserError(
            f"{where}: task `{task}` doc_id {key[1]} (filter {chosen}) is only in the {side} arm "
            f"({len(only_b)} item(s) only in baseline, {len(only_c)} only in candidate); "
            "both arms must run the same items (same limit and task version).")
    keys = sorted(b)
    _check_repeats(task, [b[k] for k in keys], [c[k] for k in keys], baseline.source,
                   candidate.source)
    b_values, c_values = [], []
    for key in keys:
        rb, rc = b[key], c[key]
        if rb.doc_hash != rc.doc_hash:
            raise UserError(f"{where}: task `{task}` doc_id {key[1]}: the arms saw different "
                            "documents (doc_hash differs); the task data changed between runs.")
        if rb.prompt_hash != rc.prompt_hash:
            raise UserError(f"{where}: task `{task}` doc_id {key[1]}: the arms saw different "
                            "prompts (prompt_hash differs); check num_fewshot, the few-shot seed "
                            "and chat-template settings.")
        if rb.target_hash and rc.target_hash and rb.target_hash != rc.target_hash:
            raise UserError(f"{where}: task `{task}` doc_id {key[1]}: the arms scored against "
                            f"different targets (target_hash differs: {rb.target[:40]!r} vs "
                            f"{rc.target[:40]!r}); the task definition changed between the "
                            "arms' runs - run both under one definition (--fresh).")
        for side, record in (("baseline", rb), ("candidate", rc)):
            if metric not in record.metrics:
                raise UserError(f"{where}: task `{task}` has no metric `{metric}` in the {side} "
                                f"arm (available: {', '.join(sorted(record.metrics))}).")
        b_values.append(rb.metrics[metric])
        c_values.append(rc.metrics[metric])
    return PairedTask(
        task=task, metric=metric, filter=chosen, doc_ids=tuple(k[1] for k in keys),
        baseline=np.asarray(b_values, dtype=float), candidate=np.asarray(c_values, dtype=float),
        baseline_records=tuple(b[k] for k in keys), candidate_records=tuple(c[k] for k in keys))
