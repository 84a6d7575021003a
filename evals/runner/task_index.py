"""Are the config's task names known to lm-eval? Checked in the parent, before any worker
or audit process starts, so a typo costs neither an engine start nor a vLLM import.

The bundled tasks and an include path are found by scanning their YAML files for
`task:`, `group:` and `tag:` names (fast); only a name not found there costs loading
lm-eval's own task index (about 10 s on a 2-core machine).
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path

_NAME = re.compile(r"^(task|group):[ \t]*['\"]?([^'\"\s#]+)", re.MULTILINE)
_TAG_LIST = re.compile(r"^tag:\s*\n((?:\s*-\s*\S+\s*\n)+)", re.MULTILINE)
_TAG_ONE = re.compile(r"^tag:[ \t]*['\"]?([^'\"\s#\[]+)", re.MULTILINE)


def local_task_names(include_paths: list[str] | tuple[str, ...]) -> set[str]:
    names: set[str] = set()
    for root in include_paths:
        for path in Path(root).rglob("*.yaml"):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            names.update(match[1] for match in _NAME.findall(text))
            names.update(_TAG_ONE.findall(text))
            for block in _TAG_LIST.findall(text):
                names.update(item.strip().lstrip("-").strip() for item in block.splitlines()
                             if item.strip())
    return names


def unknown_tasks(names: list[str], include_paths: list[str] | tuple[str, ...]
                  ) -> list[tuple[str, list[str]]]:
    """The names neither the include paths nor lm-eval's index know, each with close
    matches to suggest."""
    local = local_task_names(include_paths)
    missing = [n for n in names if n not in local]
    if not missing:
        return []
    from lm_eval.tasks import TaskManager

    known = set(_lm_eval_index(TaskManager, tuple(include_paths)).all_tasks) | local
    return [(n, difflib.get_close_matches(n, known, n=3)) for n in missing if n not in known]


def task_manager(task_manager_cls, include_paths: list[str] | tuple[str, ...],
                 tasks: list[str]):
    """lm-eval's task index. Indexing lm-eval's own ~thousands of task files takes ~10 s on
    a 2-core machine; when the include paths hold every task asked for, they alone are
    indexed (found by the same names as `local_task_names`)."""
    include = list(include_paths) or None
    if include and not set(tasks) - local_task_names(include):
        local = task_manager_cls(include_path=include, include_defaults=False)
        if all(t in local.all_tasks for t in tasks):
            return local
    return _lm_eval_index(task_manager_cls, tuple(include_paths))


@functools.lru_cache(maxsize=4)
def _lm_eval_index(task_manager_cls, include_paths: tuple[str, ...]):
    """lm-eval's whole task index with the include paths, built once per process: a run
    that names one of lm-eval's own tasks asks for it twice (the task-name check and the
    arms' task fingerprints), ~10 s each on a 2-core machine. The index maps names to
    YAML paths; a task's files are read when it is loaded, so an edited task file is seen."""
    return task_manager_cls(include_path=list(include_paths) or None)
