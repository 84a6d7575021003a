"""Loads the bundled task data from the files next to this module (no dataset hub).

Written by scripts/build_embedded.py; lm-eval calls these through `custom_dataset`.
"""

from pathlib import Path

import datasets

DATA = Path(__file__).resolve().parent / "data"


def _load(stem: str) -> datasets.DatasetDict:
    splits = {"test": DATA / f"{stem}_test.jsonl"}
    train = DATA / f"{stem}_train.jsonl"
    if train.exists():
        splits["train"] = train
    return datasets.DatasetDict(
        {name: datasets.Dataset.from_json(str(path)) for name, path in splits.items()}
    )


def reviews(**_kwargs) -> datasets.DatasetDict:
    return _load("reviews")


def addition(**_kwargs) -> datasets.DatasetDict:
    return _load("addition")
