"""Tasks whose items arrive in waves: wave 2 only after wave 1 has completed.

A task declares `metadata: {waves: FIELD}`; each item's FIELD names its wave. The runner
runs each wave's items as one lm-eval call (lm-eval's vLLM backend submits them in one
`generate`, so all of a wave's requests are in flight at once), in ascending wave order
in the same engine, so a later wave finds what the earlier one left in the prefix cache.
This is how vLLM's #43559 regression test sends its cold race and multi-turn waves
(tasks/recall, scripts/build_recall_tasks.py). A later wave is expected to resume from the
cache (its prefix-cache hits are the evidence) unless `metadata.fresh_waves` lists its value:
a wave that shares no prefix with an earlier one, such as the next manual's cold start in
a task that repeats the cold race over several manuals.
"""

from __future__ import annotations

from collections.abc import Sequence


def _metadata(task_obj) -> dict:
    return getattr(getattr(task_obj, "config", None), "metadata", None) or {}


def wave_field(task_obj) -> str | None:
    """The document field a task's `metadata.waves` names, or None."""
    field = _metadata(task_obj).get("waves")
    return str(field) if field else None


def fresh_waves(task_obj) -> set:
    """The wave values a task's `metadata.fresh_waves` lists (no prefix-cache hit expected)."""
    return set(_metadata(task_obj).get("fresh_waves") or ())


def indexed_without_waves(manager, task: str) -> bool:
    """True when lm-eval's task index shows the task's config declares no waves (so its
    documents need not be loaded to find out); False when it does or the index cannot say."""
    entry = getattr(manager, "task_index", {}).get(task)
    cfg = getattr(entry, "cfg", None)
    return isinstance(cfg, dict) and not (cfg.get("metadata") or {}).get("waves")


def group_waves(docs: Sequence[dict], field: str, limit: int | None = None,
                task: str = "") -> list[list[int]]:
    """Item indices per wave, waves in ascending order of their value; `limit` keeps the
    first `limit` items of each wave (so a short run still has every wave)."""
    groups: dict = {}
    for index, doc in enumerate(docs):
        if field not in doc:
            raise ValueError(f"task `{task}`: item {index} has no field `{field}` "
                             "(its metadata.waves names it)")
        groups.setdefault(doc[field], []).append(index)
    return [groups[value][:limit] if limit else groups[value] for value in sorted(groups)]


def mark_fresh(groups: list[list[int]], docs: Sequence[dict], field: str,
               fresh: set) -> list[tuple[list[int], bool]]:
    """Each wave's items (group_waves) with whether its value is one `fresh` lists; a wave's
    items share their value, so its first item's value is the wave's."""
    return [(items, docs[items[0]][field] in fresh) for items in groups]
