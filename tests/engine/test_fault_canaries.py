"""Fault canaries on real engines: the gate catches faults modeled on real vLLM bugs, the
#43559-style interaction fault fires only with prefix caching and MTP both on, a fault
never reaches an arm that did not ask for it, and an optimization that never engaged is
"not exercised" instead of PASS.

The tests share one run store: the canary's clean baseline (prefix caching off, no MTP)
and clean candidate (both on) are reused by the interaction test's arms with the same
settings, so each engine configuration starts as few times as possible.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from engine_helpers import CPU_ENV, ENGINE, MODEL, REPO, run_cli, save_artifact, write_config

from evals.record.canary_record import read_canary_record
from evals.schemas import CANARY, STUDY

# enforce_eager: these tests check accuracy faults, not compilation (a quicker engine start)
EAGER = {**ENGINE, "enforce_eager": True, "block_size": 32}
PC = {"enable_prefix_caching": True}
NO_PC = {"enable_prefix_caching": False}
MTP = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}
SHARED_PREFIX = {"name": "tiny_reviews_shared_prefix", "metric": "exact_match"}
ADDITION = {"name": "tiny_addition", "metric": "exact_match"}
LIMIT = 1200
INTERACTION = {"name": "prefix_hit_overrun", "rate": 1.0, "only_with_spec_decode": True}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    root = tmp_path_factory.mktemp("canary")
    return {"root": root, "reports": root / "reports", "store": root / "store"}


@pytest.fixture(scope="module")
def canary(shared):
    config = write_config(shared["root"], "mtp-prefix", {"engine": {**EAGER, **NO_PC}},
                          {"engine": {**EAGER, **PC, **MTP}}, tasks=[SHARED_PREFIX, ADDITION],
                          limit=LIMIT,
                          intended_change=["speculative_config", "enable_prefix_caching"])
    result = run_cli("canary", str(config), "--reports", str(shared["reports"]), "--store",
                     str(shared["store"]), timeout=3000)
    (canary_dir,) = shared["reports"].glob("canary-*")
    data = CANARY.read(canary_dir / "canary.json")
    save_artifact("canary_mtp_prefix.json", data)
    return result, canary_dir, data


def test_canary_catches_every_harmful_fault_and_not_the_benign_one(canary):
    result, canary_dir, data = canary
    # the one reader takes the real canary.json as written
    assert read_canary_record(canary_dir / "canary.json").model_dump() == data
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "Traceback" not in result.stderr
    faults = {f["fault"]: f for f in data["faults"]}
    harmful = [f for f in data["faults"] if f["harmful"]]
    assert len(harmful) >= 3
    for f in data["faults"]:
        assert {"fault", "rate", "harmful", "verdict", "exit_code", "caught"} <= set(f)
        assert f["fired"] > 0, f  # the fault really touched requests or tokens
    for f in harmful:
        assert f["caught"] and f["verdict"] == "REGRESSION" and f["exit_code"] == 1, f
        assert f["correct_to_wrong"] > f["wrong_to_correct"]
        assert f["min_detectable_rate"] is not None and 0 < f["min_detectable_rate"] <= 1
    benign = faults["benign_tie_noise"]
    assert not benign["caught"] and benign["exit_code"] in (0, 3) and not benign["harmful"]
    assert faults["prefix_hit_overrun"]["options"] == {"only_with_spec_decode": True}
    assert data["clean"]["verdict"] == "PASS" and data["passed"] is True
    # the clean candidate's exercise evidence: prefix caching and MTP both engaged
    rows = {(r["arm"], r["task"]): r for r in data["exercise"]["tasks"]}
    assert rows[("candidate", "tiny_reviews_shared_prefix")]["cached_share"] > 0.5
    assert rows[("baseline", "tiny_reviews_shared_prefix")]["cached_tokens"] == 0
    assert rows[("candidate", "tiny_addition")]["drafted_tokens"] > 0
    assert data["exercise"]["not_exercised"] == []
    # every fault run reused the stored baseline instead of starting its engine again
    for f in data["faults"]:
        summary = json.loads((canary_dir.parent / f["run_id"] / "summary.json").read_text())
        tasks = summary["arms"]["baseline"]["tasks"]
        assert all(t.get("reused_from") for t in tasks.values()), f["fault"]
        assert summary["faults"]["candidate"]["requested"][0]["name"] == f["fault"]
        assert "baseline" not in summary["faults"]
    html = (canary_dir / "canary.html").read_text(encoding="utf-8")
    assert "Fault canaries: PASSED" in html and "prefix_hit_overrun" in html
    assert "canary PASSED" in result.stdout


def _paired_rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "paired_items.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    return [json.loads(line) for line in lines]


def _ab(shared, name: str, engine: dict, *extra: str, env: dict | None = None):
    config = write_config(shared["root"], name, {"engine": engine},
                          {"engine": engine, "faults": [INTERACTION]}, tasks=[SHARED_PREFIX],
                          limit=LIMIT, intended_change=[])
    proc = subprocess.run([sys.executable, "-m", "evals", "ab", str(config), "--reports",
                           str(shared["reports"]), "--store", str(shared["store"]), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=1500,
                          env={**os.environ, **(env or {})})
    run_dirs = [p.parent for p in shared["reports"].glob(f"{name}-*/summary.json")]
    assert len(run_dirs) == 1, proc.stdout + proc.stderr
    return proc, run_dirs[0]


def test_interaction_fault_changes_answers_only_with_prefix_caching_and_mtp(shared, canary):
    """prefix_hit_overrun with only_with_spec_decode, at rate 1, injected into the candidate
    of four A/Bs whose arms are otherwise identical: prefix caching off/on x MTP off/on.

    "both" is the canary's own fault run (its arms come from the store: the clean candidate
    and the prefix_hit_overrun candidate of the canary have these very settings)."""
    fired = {}
    # a fault set in the user's shell must never reach an arm: prefix_key_collision would
    # fire in the prefix-only baseline (prefix caching on, shared prefixes) and change answers
    leak = {"EVALS_FAULTS": json.dumps([{"name": "prefix_key_collision", "rate": 1.0}])}
    for name, engine, env in (("neither", {**EAGER, **NO_PC}, None),
                              ("prefix-only", {**EAGER, **PC}, leak),
                              ("mtp-only", {**EAGER, **NO_PC, **MTP}, None)):
        proc, run_dir = _ab(shared, name, engine, env=env)
        rows = _paired_rows(run_dir)
        assert len(rows) == LIMIT
        # item by item the same answers: the fault stayed inert, and nothing leaked
        assert all(r["baseline_response"] == r["candidate_response"] for r in rows), name
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        summary = json.loads((run_dir / "summary.json").read_text())
        fired[name] = summary["faults"]["candidate"]["fired"].get("prefix_hit_overrun", 0)
        assert "baseline" not in summary["faults"], name
        assert not (run_dir / "arms/baseline/fault_tally").exists(), name
    assert fired == {"neither": 0, "prefix-only": 0, "mtp-only": 0}
    proc, run_dir = _ab(shared, "both", {**EAGER, **PC, **MTP})
    assert "starting" not in proc.stdout  # both arms reused from the canary's runs
    rows = _paired_rows(run_dir)
    changed = sum(r["baseline_response"] != r["candidate_response"] for r in rows)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["faults"]["candidate"]["fired"]["prefix_hit_overrun"] > 0
    assert changed >= LIMIT // 10, f"only {changed} answers changed"
    assert proc.returncode == 1 and summary["verdict"] == "REGRESSION"
    _, canary_dir, data = canary
    clean = {r["doc_id"]: r["candidate_response"]
             for r in _paired_rows(canary_dir.parent / data["clean"]["run_id"])
             if r["task"] == "tiny_reviews_shared_prefix"}
    assert {r["doc_id"]: r["baseline_response"] for r in rows} == clean
    save_artifact("canary_interaction.json", {"fired": fired, "both_changed": changed,
                                              "items": LIMIT})


def test_factorial_study_blames_the_combination_and_finds_the_interaction(shared, canary):
    """The 2x2 study (`ab` on a `factorial:` config) with the #43559-style fault on every
    arm: exactly the combined arm regresses, the interaction is significant, and the page
    says the drop appears only with the combination. Its four arms have the settings of the
    interaction test's fault arms, so they come from the shared store when that test ran."""
    config = shared["root"] / "study.yaml"
    config.write_text(yaml.safe_dump({
        "name": "study-interaction", "model": str(MODEL), "tasks": [SHARED_PREFIX],
        "limit": LIMIT, "num_fewshot": 0, "seed": 1234, "gate": {"alpha": 0.05, "margin": 0.05},
        "arm_defaults": {"env": CPU_ENV, "engine": EAGER, "faults": [INTERACTION]},
        "factorial": {"prefix_caching": {"off": NO_PC, "on": PC},
                      "decoding": {"plain": {}, "mtp": MTP}}}, sort_keys=False))
    result = run_cli("ab", str(config), "--reports", str(shared["reports"]), "--store",
                     str(shared["store"]), timeout=3000)
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-4000:]
    (study_dir,) = [p.parent for p in shared["reports"].glob("study-interaction-*/study.json")]
    study = STUDY.read(study_dir / "study.json")
    combined = "prefix_caching=on+decoding=mtp"
    assert study["arms"] == ["baseline", "prefix_caching=on", "decoding=mtp", combined]
    verdicts = {c["arm"]: c["verdict"] for c in study["comparisons"]}
    assert len(verdicts) == 3 and verdicts[combined] == "REGRESSION", verdicts
    assert [a for a, v in verdicts.items() if v == "REGRESSION"] == [combined], verdicts
    assert study["verdict"] == "REGRESSION" and study["exit_code"] == 1
    (interaction,) = study["interactions"]  # one task, one pair of factors
    assert interaction["task"] == SHARED_PREFIX["name"] and interaction["n"] == LIMIT
    assert interaction["significant"] and interaction["contrast"] < 0
    assert interaction["ci_high"] < 0 and interaction["pvalue"] < 0.05
    assert "appears only with the combination" in interaction["sentence"]
    # the Holm family spans every arm: each comparison's adjusted p >= its raw p
    for c in study["comparisons"]:
        (task,) = c["tasks"]
        assert task["regression_pvalue_adjusted"] >= task["regression_pvalue"]
    # each comparison is an ordinary run: its own report, markdown and JUnit, in the store
    for arm in verdicts:
        comparison = study_dir / "comparisons" / arm
        for name in ("report.html", "summary.md", "junit.xml", "summary.json"):
            assert (comparison / name).is_file(), (arm, name)
    html = (study_dir / "study.html").read_text(encoding="utf-8")
    assert 'id="matrix"' in html and 'id="interactions"' in html and combined in html
    assert "STUDY VERDICT: REGRESSION" in result.stdout
    listed = run_cli("runs", "--store", str(shared["store"]), "--limit", "50")
    assert all(f"{study_dir.name}.{arm}" in listed.stdout for arm in verdicts), listed.stdout
    save_artifact("study_interaction.json", study)


def test_prefix_caching_on_prompts_shorter_than_a_block_is_not_exercised(tmp_path):
    """tiny_reviews_gen's prompts are far shorter than the CPU default block (128 tokens):
    prefix caching cannot hit, so the run must not PASS. The same run carries the bundled
    passage task (four questions per review) analysed with `cluster: passage_id`."""
    passages = {"name": "tiny_reviews_passages", "metric": "exact_match",
                "cluster": "passage_id", "gate": False}
    config = write_config(tmp_path, "short-prompts", {"engine": {**ENGINE, **NO_PC}},
                          {"engine": {**ENGINE, **PC}},
                          tasks=[{"name": "tiny_reviews_gen", "metric": "exact_match"},
                                 passages],
                          intended_change=["enable_prefix_caching"])
    result = run_cli("ab", str(config), "--reports", str(tmp_path / "reports"))
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    (summary_path,) = (tmp_path / "reports").glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert summary["verdict"] == "INCONCLUSIVE" and summary["reason"].startswith("not exercised")
    assert summary["exercise"]["not_exercised"] == ["prefix caching"]
    (row,) = [r for r in summary["exercise"]["tasks"]
              if r["arm"] == "candidate" and r["task"] == "tiny_reviews_gen"]
    assert row["cached_tokens"] == 0 and row["queried_tokens"] > 0
    clustered = next(t for t in summary["tasks"] if t["task"] == "tiny_reviews_passages")
    assert clustered["clusters"] == 50 and clustered["design_effect"] is not None
    assert clustered["regression_test"].startswith("cluster-robust t-test")
    assert "NOT EXERCISED: prefix caching" in result.stdout
    html = (summary_path.parent / "report.html").read_text(encoding="utf-8")
    assert "Not exercised" in html
