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


PASSAGES = 300
QUESTIONS = 4  # per passage


def review_passages(**_kwargs) -> datasets.DatasetDict:
    """Several questions per passage (for `cluster: passage_id`): each of the first 300
    test reviews is asked four times, after 0 to 3 labelled examples (the last three test
    reviews), so the answers about one review are correlated."""
    test = [dict(row) for row in datasets.Dataset.from_json(str(DATA / "reviews_test.jsonl"))]
    shots = [f"Review: {r['text']}\nSentiment: {r['label']}\n\n" for r in test[-3:]]
    rows = []
    for passage, review in enumerate(test[:PASSAGES]):
        for question in range(QUESTIONS):
            rows.append({"passage_id": f"p{passage:03d}", "question": question,
                         "shots": "".join(shots[:question]), "text": review["text"],
                         "label": review["label"]})
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
