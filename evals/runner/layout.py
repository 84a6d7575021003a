"""Where one arm's files live, and atomic writes of its small JSON records."""

from __future__ import annotations

import json
import re
from pathlib import Path

from evals.errors import UserError
from evals.schemas import ARM_MANIFEST, CHUNK_MARKER, FAULT_TALLY, TASK_MARKER

# lm-eval's name for a task's `--log_samples` file
_SAMPLES_RE = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")


SWEEP_FILE = "load_sweep.json"
"""A server arm's raw load sweep (evals.runner.load_sweep), in the arm's folder."""


SWEEP_SETTINGS = ("levels", "requests_per_level", "prompts", "output_tokens",
                  "request_timeout_s", "level_timeout_s")
"""What of `speed:` a recorded sweep must share to stand in for a reused arm's."""


def sweep_path(arm_root: Path) -> Path:
    return Path(arm_root) / SWEEP_FILE


def sweep_settings(load_sweep: dict) -> dict:
    """The settings a sweep record keeps (ArmSpec.load_sweep without `on_reuse`)."""
    return {k: load_sweep.get(k) for k in SWEEP_SETTINGS}


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

    def repeats_file(self, task: str) -> Path:
        """Every repeat's score of the task's generation items (`repeats: k`)."""
        return self.root / "repeats" / f"{task}.json"

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

    def sweep_due(self, spec) -> bool:
        """A server arm of a config with `speed:` whose sweep record is not here yet."""
        return bool(spec.load_sweep) and spec.mode == "server" and \
            not sweep_path(self.root).exists()

    def task_done(self, task: str, key: str) -> bool:
        """The task's marker has this key and the samples files it vouches for are whole
        (a damaged file is not trusted: the task runs again, see `damaged_output`)."""
        marker = self.task_marker(task)
        if not marker.exists():
            return False
        try:
            record = TASK_MARKER.read(marker)
        except UserError:  # half-written by a crash, or from a newer suite: run it again
            return False
        return record.get("key") == key and self.damaged_output(record) is None

    def damaged_output(self, record: dict) -> str | None:
        """Why a finished task's samples are not what its marker recorded (a file missing,
        cut short, or with a broken last line), or None. Only markers that recorded their
        sample counts (`n_samples`, one per lm-eval task) are checked line by line; a
        sequential task's merged file (`items_run`) for whole lines."""
        counts = record.get("n_samples")
        if not isinstance(counts, dict):
            if "items_run" not in record or not record.get("task"):
                return None
            counts = {record["task"]: None}
        found = samples_files(self.lm_eval_dir)
        for name, expected in sorted(counts.items()):
            paths = found.get(name)
            if not paths:
                return f"no samples file of `{name}` in {self.lm_eval_dir}"
            newest = max(paths, key=lambda p: p.name)
            problem = _jsonl_problem(newest, expected)
            if problem:
                return f"{newest} {problem}"
        return None

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


def _jsonl_problem(path: Path, expected: object) -> str | None:
    """A samples file holds `expected` whole JSON lines, or what is wrong with it."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"is unreadable ({exc.strerror})"
    lines = data.splitlines()
    if lines and not data.endswith(b"\n"):
        return "ends in the middle of a line"
    if isinstance(expected, int) and len(lines) != expected:
        return f"holds {len(lines)} of the {expected} samples recorded"
    try:
        if lines:
            json.loads(lines[-1])
    except ValueError:
        return "has a broken last line"
    return None
