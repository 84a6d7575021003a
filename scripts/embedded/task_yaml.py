"""Writes the lm-eval task YAMLs for the bundled tasks (tasks/embedded/)."""

from __future__ import annotations

from pathlib import Path

import yaml

TASK_VERSION = 1.0

LOADER = '''"""Loads the bundled task data from the files next to this module (no dataset hub).

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
    shots = [f"Review: {r['text']}\\nSentiment: {r['label']}\\n\\n" for r in test[-3:]]
    rows = []
    for passage, review in enumerate(test[:PASSAGES]):
        for question in range(QUESTIONS):
            rows.append({"passage_id": f"p{passage:03d}", "question": question,
                         "shots": "".join(shots[:question]), "text": review["text"],
                         "label": review["label"]})
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
'''

_GEN_KWARGS = {"until": ["\n"], "max_gen_toks": 8, "do_sample": False, "temperature": 0.0}
_STRIP = [{"name": "strip", "filter": [{"function": "remove_whitespace"}, {"function": "take_first"}]}]
_EXACT = [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True,
           "ignore_case": True, "ignore_punctuation": True}]


def task_configs(prefix: str) -> dict[str, dict]:
    reviews_common = {
        "tag": ["embedded_tiny"],
        "custom_dataset": "!function data_loader.reviews",
        "test_split": "test",
        "doc_to_text": "Review: {{text}}\nSentiment:",
        "metadata": {"version": TASK_VERSION},
    }
    return {
        "tiny_reviews_gen": {
            **reviews_common,
            "task": "tiny_reviews_gen",
            "output_type": "generate_until",
            "doc_to_target": "{{label}}",
            "generation_kwargs": _GEN_KWARGS,
            "filter_list": _STRIP,
            "metric_list": _EXACT,
        },
        "tiny_reviews_mc": {
            **reviews_common,
            "task": "tiny_reviews_mc",
            "output_type": "multiple_choice",
            "doc_to_target": "{{label_index}}",
            "doc_to_choice": ["positive", "negative", "neutral"],
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        },
        "tiny_reviews_shared_prefix": {
            **reviews_common,
            "task": "tiny_reviews_shared_prefix",
            "output_type": "generate_until",
            "description": prefix,
            "doc_to_target": "{{label}}",
            "generation_kwargs": _GEN_KWARGS,
            "filter_list": _STRIP,
            "metric_list": _EXACT,
        },
        "tiny_reviews_passages": {
            "tag": ["embedded_tiny"],
            "task": "tiny_reviews_passages",
            "custom_dataset": "!function data_loader.review_passages",
            "test_split": "test",
            "output_type": "generate_until",
            "doc_to_text": "{{shots}}Review: {{text}}\nSentiment:",
            "doc_to_target": "{{label}}",
            "generation_kwargs": _GEN_KWARGS,
            "filter_list": _STRIP,
            "metric_list": _EXACT,
            "metadata": {"version": TASK_VERSION},
        },
        "tiny_addition": {
            "tag": ["embedded_tiny"],
            "task": "tiny_addition",
            "custom_dataset": "!function data_loader.addition",
            "test_split": "test",
            "output_type": "generate_until",
            "doc_to_text": "Add: {{question}}",
            "doc_to_target": "{{answer}}",
            "generation_kwargs": _GEN_KWARGS,
            "filter_list": _STRIP,
            "metric_list": _EXACT,
            "metadata": {"version": TASK_VERSION},
        },
    }


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str):
    if value.startswith("!function "):
        return dumper.represent_scalar("!function", value.split(" ", 1)[1])
    style = "|" if "\n" in value and len(value) > 80 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def write(task_dir: Path, prefix: str) -> list[Path]:
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "data_loader.py").write_text(LOADER, encoding="utf-8")
    written = []
    for name, config in task_configs(prefix).items():
        path = task_dir / f"{name}.yaml"
        path.write_text(yaml.dump(config, Dumper=_Dumper, sort_keys=False, allow_unicode=False,
                                  width=100), encoding="utf-8")
        written.append(path)
    return written
