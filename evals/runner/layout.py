"""Where one arm's files live, and atomic writes of its small JSON records."""

from __future__ import annotations

import re
from pathlib import Path

from evals.errors import UserError
from evals.record.schemas import ARM_MANIFEST, CHUNK_MARKER, FAULT_TALLY, TASK_MARKER

# lm-eval's name for a task's `--log_samples` file
_SAMPLES_RE = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")


class ArmLayout:
    """<arm>/spec.json, manifest.json, worker.log, lm_eval/ (lm-eval's layout), tasks/<task>.json,
    and for sequential runs chunks/<task>/<k>/ (one lm-eval output per chunk, merged into lm_eval/)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.lm_eval_dir = self.root / "lm_eval"
        self.tasks_dir = self.root / "tasks"
        self.spec_path = self.root / "spec.json"
        self.manifest_path = self.root / "manifest.json"
        self.log_path = self.root / "worker.log"
        self.chunks_dir = self.root / "chunks"
        self.speed_dir = self.root / "speed"
        self.fault_tally_dir = self.root / "fault_tally"

    def warm_layout(self) -> ArmLayout:
        """Cache stress: the warm pass's own chunks/ and lm_eval/ under <arm>/warm/."""
        return ArmLayout(self.root / "warm")

    def logprobs_file(self, task: str) -> Path:
        """Per-token top-k log-probabilities of the task's generations (`logprobs: k`)."""
        return self.root / "logprobs" / f"{task}.jsonl"

    def speed_file(self, task: str) -> Path:
        return self.speed_dir / f"{task}.json"

    def chunk_dir(self, task: str, index: int) -> Path:
        return self.chunks_dir / task / f"{index:04d}"

    @staticmethod
    def chunk_done(chunk_dir: Path) -> bool:
        return (chunk_dir / "done.json").exists()

    @staticmethod
    def mark_chunk_done(chunk_dir: Path, items: int) -> None:
        CHUNK_MARKER.write(chunk_dir / "done.json", {"items": items})

    def task_marker(self, task: str) -> Path:
        return self.tasks_dir / f"{task}.json"

    def task_done(self, task: str, key: str) -> bool:
        marker = self.task_marker(task)
        if not marker.exists():
            return False
        try:
            return TASK_MARKER.read(marker).get("key") == key
        except UserError:  # half-written by a crash, or from a newer suite: run it again
            return False

    def task_record(self, task: str) -> dict:
        return TASK_MARKER.read(self.task_marker(task))

    def mark_task_done(self, task: str, record: dict) -> None:
        TASK_MARKER.write(self.task_marker(task), record)

    def fault_tally(self) -> dict[str, int]:
        """How often each canary fault fired in this arm's engine processes (summed)."""
        total: dict[str, int] = {}
        for path in sorted(self.fault_tally_dir.glob("*.json")):
            try:
                counts = FAULT_TALLY.read(path)["fired"]
            except UserError:  # a process killed mid-write: its tally is lost, not the run
                continue
            for name, n in counts.items():
                total[name] = total.get(name, 0) + int(n)
        return total

    def read_manifest(self) -> dict:
        if not self.manifest_path.exists():
            return {}
        return ARM_MANIFEST.read(self.manifest_path)

    def write_manifest(self, data: dict) -> None:
        ARM_MANIFEST.write(self.manifest_path, data)


def samples_files(root: Path, task: str | None = None) -> dict[str, list[Path]]:
    """Every `samples_<task>_<stamp>.jsonl` under root, by task (exact task names)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(Path(root).rglob("samples_*.jsonl")):
        match = _SAMPLES_RE.match(path.name)
        if match and (task is None or match["task"] == task):
            found.setdefault(match["task"], []).append(path)
    return found
