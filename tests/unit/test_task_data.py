"""The bundled task data is rebuilt byte for byte from its seed, and splits never overlap."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "embedded"))

import task_data  # noqa: E402
import task_yaml  # noqa: E402

SHIPPED = REPO / "tasks" / "embedded"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rebuild_is_byte_identical_to_the_shipped_files(tmp_path):
    paths = task_data.build(tmp_path / "data", seed=1234)
    for name in ("reviews_test", "addition_test", "shared_prefix"):
        assert digest(paths[name]) == digest(SHIPPED / "data" / paths[name].name), name
    written = task_yaml.write(tmp_path, paths["shared_prefix"].read_text())
    for path in written:
        assert path.read_bytes() == (SHIPPED / path.name).read_bytes(), path.name
    assert (tmp_path / "data_loader.py").read_bytes() == (SHIPPED / "data_loader.py").read_bytes()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = task_data.build(tmp_path / "a", seed=7, n_train_reviews=2000, n_test=300)
    b = task_data.build(tmp_path / "b", seed=7, n_train_reviews=2000, n_test=300)
    c = task_data.build(tmp_path / "c", seed=8, n_train_reviews=2000, n_test=300)
    for name in a:
        assert digest(a[name]) == digest(b[name]), name
    assert digest(a["reviews_test"]) != digest(c["reviews_test"])


def test_evaluation_items_never_appear_in_training(tmp_path):
    paths = task_data.build(tmp_path, seed=1234)

    def rows(name):
        return [json.loads(line) for line in paths[name].read_text().splitlines()]

    test_reviews = {r["text"] for r in rows("reviews_test")}
    train_reviews = {r["text"] for r in rows("reviews_train")}
    assert len(test_reviews) == 1200 and not test_reviews & train_reviews
    test_sums = {r["question"] for r in rows("addition_test")}
    assert len(test_sums) == 1200 and not test_sums & {r["question"] for r in rows("addition_train")}
    labels = [r["label"] for r in rows("reviews_test")]
    assert set(labels) == {"positive", "negative", "neutral"}
    assert min(labels.count(label) for label in set(labels)) > 150
