"""Reading an arm's per-token log-probabilities (<arm>/logprobs/<task>.jsonl, written by
evals.runner.logprob_capture) into `TaskLogprobs`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from evals.errors import UserError
from evals.schemas import LOGPROBS_HEADER


@dataclass(frozen=True, slots=True)
class Generation:
    """One item's generated tokens and, per token, the top-k (token id -> log-probability,
    the chosen token included)."""

    tokens: tuple[int, ...]
    top: tuple[dict[int, float], ...]


@dataclass(frozen=True, slots=True)
class TaskLogprobs:
    task: str
    top_k: int
    items: dict[int, Generation]
    """doc_id -> its generation."""


def _generation(row: dict, where: str) -> Generation:
    tokens, top = row["tokens"], row["top"]
    if not isinstance(tokens, list) or not isinstance(top, list) or len(tokens) != len(top):
        raise ValueError("`tokens` and `top` must be lists of the same length")
    dists = []
    for entry in top:
        dist = {int(t): float(lp) for t, lp in entry}
        if not dist or not all(lp <= 1e-6 and not math.isnan(lp) for lp in dist.values()):
            raise ValueError("a top-k entry must hold log-probabilities <= 0")
        dists.append(dist)
    return Generation(tuple(int(t) for t in tokens), tuple(dists))


def read_task_logprobs(path: Path) -> TaskLogprobs:
    """One task's file; the last row of a doc_id wins (a chunk run again after a crash).
    A last line cut short by a crash is skipped; any other bad line is a UserError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: unreadable logprobs file ({exc}).") from None
    lines = text.split("\n")
    complete = text.endswith("\n")
    try:
        header = LOGPROBS_HEADER.load(json.loads(lines[0]), str(path))
        task, top_k = str(header["task"]), int(header["top_k"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path}, line 1: not a logprobs header ({exc}).") from None
    items: dict[int, Generation] = {}
    body = lines[1:-1] if complete else lines[1:]
    for number, line in enumerate(body, 2):
        if not line:
            continue
        try:
            row = json.loads(line)
            items[int(row["doc_id"])] = _generation(row, f"{path}, line {number}")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if not complete and number == len(lines):
                break  # cut short by a crash while appending
            raise UserError(f"{path}, line {number}: malformed logprobs row ({exc}).") from None
    return TaskLogprobs(task, top_k, items)


def read_arm_logprobs(arm_root: Path, tasks: list[str]) -> dict[str, TaskLogprobs]:
    """Every task of `tasks` that has a logprobs file under <arm_root>/logprobs/."""
    found = {}
    for task in tasks:
        path = Path(arm_root) / "logprobs" / f"{task}.jsonl"
        if path.exists():
            found[task] = read_task_logprobs(path)
    return found
