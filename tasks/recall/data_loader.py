"""Loads a needle-recall task's items (written by scripts/build_recall_tasks.py).

lm-eval passes the task's `metadata` to `custom_dataset`; `data` names the file.
"""

from pathlib import Path

import datasets

DATA = Path(__file__).resolve().parent / "data"


def recall(data: str, **_metadata) -> datasets.DatasetDict:
    return datasets.DatasetDict(
        {"test": datasets.Dataset.from_json(str(DATA / f"{data}.jsonl"))})
