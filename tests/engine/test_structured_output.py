"""Structured output (guided decoding) as an optimization under test: the candidate's
generations are constrained to the label set, in offline mode and behind `vllm serve`."""

from __future__ import annotations

import json

from engine_helpers import ENGINE, LIMIT, read_summary, run_cli, write_config

LABELS = [" positive", " negative", " neutral"]
PLAIN = {**ENGINE, "enable_prefix_caching": False}  # the offline baseline: the shared one


def _candidate_responses(reports) -> list[str]:
    (items,) = list(reports.glob("*/paired_items.jsonl"))
    rows = [json.loads(x) for x in items.read_text(encoding="utf-8").splitlines()[1:]]
    return [r["candidate_response"] for r in rows]


def test_choice_constraint_offline_and_served(tmp_path):
    # Both A/Bs compare against the offline baseline (the second reuses it from the store):
    # the constraint is the candidate's, and an unconstrained served arm runs in test_serving.
    for mode in ("offline", "server"):
        config = write_config(
            tmp_path, f"structured-{mode}", {"engine": PLAIN},
            {"mode": mode, "engine": PLAIN, "structured_output": {"choice": LABELS}},
            tasks=[{"name": "tiny_reviews_gen", "metric": "exact_match"}])
        reports = tmp_path / f"reports-{mode}"
        result = run_cli("ab", str(config), "--reports", str(reports))
        assert result.returncode in (0, 1, 3), result.stdout + result.stderr
        responses = _candidate_responses(reports)
        assert len(responses) == LIMIT and set(responses) <= set(LABELS), set(responses)
        summary = read_summary(reports)
        assert summary["tasks"][0]["candidate_mean"] > 0.5
        backend = summary["arms"]["candidate"]["backend"]
        assert backend.startswith("`vllm serve`" if mode == "server" else "vLLM offline"), backend
