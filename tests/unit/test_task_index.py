"""lm-eval's whole task index is built once per process and include paths: a run naming
one of lm-eval's own tasks asks for it from the task-name check and from every arm's task
fingerprint (~10 s each on a 2-core machine)."""

from __future__ import annotations

from evals.runner.task_index import task_manager


class CountingIndex:
    """Stands in for lm_eval.tasks.TaskManager: counts the whole-index builds."""
    built: list[tuple] = []

    def __init__(self, include_path=None, include_defaults=True):
        CountingIndex.built.append((tuple(include_path or ()), include_defaults))
        self.all_tasks = ["gsm8k"] + ([] if include_defaults else ["local_task"])


def test_the_whole_index_is_built_once_per_include_paths(tmp_path):
    CountingIndex.built = []
    first = task_manager(CountingIndex, [str(tmp_path)], ["gsm8k"])
    again = task_manager(CountingIndex, [str(tmp_path)], ["gsm8k", "arc_easy"])
    assert first is again
    assert CountingIndex.built == [((str(tmp_path),), True)]
    other = tmp_path / "other"
    other.mkdir()
    assert task_manager(CountingIndex, [str(other)], ["gsm8k"]) is not first
    assert len(CountingIndex.built) == 2


def test_tasks_all_in_the_include_paths_build_no_whole_index(tmp_path):
    CountingIndex.built = []
    (tmp_path / "t.yaml").write_text("task: local_task\n", encoding="utf-8")
    manager = task_manager(CountingIndex, [str(tmp_path)], ["local_task"])
    assert "local_task" in manager.all_tasks
    assert CountingIndex.built == [((str(tmp_path),), False)]
