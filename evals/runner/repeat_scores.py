"""Each repeat of a generation item scored on its own (issue 53, `repeats: k`).

lm-eval sends an item's k repeats as k copies of one request and logs all k answers
(`resps`), but scores the item once, on what its filter makes of them (`take_first`: the
first answer only; `maj@k`: the majority). The paired analysis needs every repeat's score,
so after the task ran, each answer r is put through each of the task's own filter
pipelines alone and scored by the task's own `process_results`, exactly as lm-eval scores a
single answer. Written to `<arm>/repeats/<task>.json` (REPEAT_SCORES), read by
evals.pair.repeats.
"""

from __future__ import annotations

from contextlib import contextmanager
from numbers import Real
from pathlib import Path

from evals.schemas import REPEAT_SCORES


@contextmanager
def tasks_with_repeats(manager, repeats: int):
    """While open, every generation task the manager loads asks for `repeats` answers per
    item (lm-eval's task config `repeats`); yields the loaded task objects, by name."""
    loaded: dict = {}
    original = manager.load

    def load(*args, **kwargs):
        result = original(*args, **kwargs)
        for name, task in result["tasks"].items():
            if repeats > 1 and task.get_config("output_type") == "generate_until":
                task.set_config(key="repeats", value=repeats)
            loaded[name] = task
        return result

    manager.load = load
    try:
        yield loaded
    finally:
        manager.load = original


def _numeric(metrics: dict) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, Real)}


def score_repeats(task, indices: list[int] | None = None) -> dict:
    """Per item: every repeat's response, and under each filter of the task the answer
    the filter extracted from it and its score. `indices`: the item indices the task ran
    on (lm-eval's `samples`), whose instances lm-eval numbers 0, 1, ... in their order; the
    items are written under their indices in the task, as lm-eval logs them."""
    by_doc: dict[int, object] = {}
    for instance in task.instances:
        doc_id = instance.doc_id if indices is None else int(indices[instance.doc_id])
        by_doc.setdefault(doc_id, instance)  # one request per generation item
    doc_ids = sorted(by_doc)
    instances = [by_doc[d] for d in doc_ids]
    docs = [inst.doc for inst in instances]
    k = min(len(inst.resps) for inst in instances) if instances else 0
    items = {d: {"doc_id": d, "responses": list(by_doc[d].resps[:k]), "answers": {},
                 "scores": {}} for d in doc_ids}
    for ensemble in task._filters:
        for r in range(k):
            resps = [[inst.resps[r]] for inst in instances]
            for make_filter in ensemble.filters:
                resps = make_filter().apply(resps, docs)
            for d, doc, filtered in zip(doc_ids, docs, resps):
                # the answer the filter extracted: what the distribution check compares
                items[d]["answers"].setdefault(ensemble.name, []).append(str(filtered))
                metrics = _numeric(task.process_results(doc, [filtered]))
                per_filter = items[d]["scores"].setdefault(ensemble.name, {})
                for name, value in metrics.items():
                    per_filter.setdefault(name, []).append(value)
    return {"repeats": k, "filters": [e.name for e in task._filters],
            "items": [items[d] for d in doc_ids]}


def write_repeat_scores(path: Path, task_name: str, task,
                        indices: list[int] | None = None) -> int:
    """Scores every repeat of the task's items and writes them; returns the repeat count."""
    record = {"task": task_name, **score_repeats(task, indices)}
    REPEAT_SCORES.write(path, record)
    return record["repeats"]


def merge_repeat_scores(parts: list[Path], path: Path) -> int:
    """One task's repeat scores written part by part (a wave task: one lm-eval call per
    wave) as one file; returns the item count. Parts must agree on the task, the repeat
    count and the filters, and no item may be in two parts."""
    records = [REPEAT_SCORES.read(part) for part in parts]
    if not records:
        raise ValueError("no repeat-score parts to merge")
    first = records[0]
    items: dict[int, dict] = {}
    for part, record in zip(parts, records):
        for key in ("task", "repeats", "filters"):
            if record[key] != first[key]:
                raise ValueError(f"{part}: {key} {record[key]!r} differs from "
                                 f"{parts[0]}'s {first[key]!r}")
        for item in record["items"]:
            if int(item["doc_id"]) in items:
                raise ValueError(f"{part}: doc_id {item['doc_id']} is in an earlier part too")
            items[int(item["doc_id"])] = item
    REPEAT_SCORES.write(path, {"task": first["task"], "repeats": first["repeats"],
                               "filters": first["filters"],
                               "items": [items[d] for d in sorted(items)]})
    return len(items)
