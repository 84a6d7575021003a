"""`python -m evals release`: one release decision from recorded runs under a policy.

The runs are the embedded model's real runs on an H200 (benchmarks/results/gpu-h200: MTP +
prefix caching twice, the KV-cache FP8 run whose tiny_addition regressed, and the other
optimizations); no engine starts. References: the runs' own recorded tests (the pipeline
computed them from the items on the GPU machine), statsmodels' Holm and Benjamini-Hochberg,
and Tango's statistic written out from the paper.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest
from scipy.stats import norm
from statsmodels.stats.multitest import multipletests

from evals.cli import main
from evals.decide.release import RunFacts, Status, TaskResult, decide_release
from evals.pipelines.release import run_release
from evals.plan.release_policy import load_policy, parse_policy
from evals.record.release_record import RELEASE_FILE, config_hash, read_release_record
from evals.record.run_record import read_run_record
from evals.report.release import publish_release

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "results" / "gpu-h200"
MTP = GPU / "gpu-mtp-prefix-0c0dac60"            # 2026-12-01T20:25:33, PASS
MTP_LATER = GPU / "session2" / "gpu-mtp-prefix-154faf04"  # 2026-12-01T22:30:31, same name
KV_FP8 = GPU / "gpu-kv-fp8-f5ecc54a"              # tiny_addition REGRESSION
EXAMPLE = ROOT / "examples" / "release" / "policy.yaml"
AS_OF = datetime(2026, 12, 6, tzinfo=timezone.utc)
TASKS = ("tiny_reviews_gen", "tiny_reviews_shared_prefix", "tiny_reviews_mc", "tiny_addition")


def _gpu_runs() -> list[Path]:
    runs = sorted(p.parent for p in GPU.glob("gpu-*/summary.json"))
    assert len(runs) == 8 and MTP in runs and KV_FP8 in runs  # an empty glob tests nothing
    return runs


def _policy(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _release(tmp_path, policy_text, runs, as_of=AS_OF):
    code, out, record = run_release(_policy(tmp_path, policy_text), runs, as_of=as_of,
                                    out_dir=tmp_path / "release", echo=lambda *_: None)
    return code, out, record, {b.benchmark: b for b in record.benchmarks}


def test_the_config_hash_is_the_one_ab_named_each_run_with():
    for run in _gpu_runs() + [MTP_LATER]:
        record = read_run_record(run)
        assert record.run_id.endswith("-" + config_hash(record.config)), run


def test_example_policy_on_the_recorded_runs_is_go_and_reproduces_the_runs_tests(tmp_path):
    code, out, record, by = _release(tmp_path, EXAMPLE.read_text(), _gpu_runs())
    assert (int(code), record.verdict) == (0, "GO")
    assert [b.status for b in record.benchmarks] == ["PASS"] * 4
    run = read_run_record(MTP)
    recorded = {t.task: t for t in run.tasks}
    gen = by["tiny_reviews_gen:exact_match"]
    assert gen.run_id == MTP.name and gen.margin == 0.03
    # at the run's own margin and alpha the release recomputes exactly what the run recorded
    for name in ("tiny_reviews_gen:exact_match", "tiny_reviews_mc"):
        b, t = by[name], recorded[name.split(":")[0]]
        assert b.noninferiority_pvalue == pytest.approx(t.noninferiority_pvalue, rel=1e-9)
        assert (b.ci_low, b.ci_high) == pytest.approx((t.ci_low, t.ci_high), abs=1e-12)
        assert b.regression_pvalue == pytest.approx(t.regression_pvalue, rel=1e-12)
    # every other GPU run is of another config: listed, not used
    assert {o.run_id for o in gen.other_runs} == {p.name for p in _gpu_runs()} - {MTP.name}
    assert all(o.why.startswith("mismatched: config hash") for o in gen.other_runs)
    # the relative guard: 5% of tiny_addition's 0.86 baseline is 4.3 points, so 3 counts
    assert by["tiny_addition"].margin == 0.03 and "4.3 pts" in by["tiny_addition"].margin_rule
    page = (out / "release.html").read_text()
    assert 'href="../../../work/main/benchmarks' not in page  # relative, not absolute
    link = Path(out, page.split('<a href="')[1].split('"')[0])
    assert link.resolve() == (MTP / "report.html").resolve() and link.is_file()
    assert read_release_record(out).model_dump() == record.model_dump()


def test_a_missing_critical_benchmark_is_no_go(tmp_path):
    code, _, record, by = _release(tmp_path, """
name: r
tiers:
  critical: [tiny_reviews_gen, tiny_reviews_multiturn]
""", [MTP])
    assert (int(code), record.verdict) == (1, "NO-GO")
    assert by["tiny_reviews_multiturn"].status == "MISSING"
    assert by["tiny_reviews_gen"].status == "PASS"
    assert record.reason == "missing evidence for tiny_reviews_multiturn"


def test_a_stale_run_is_stale_and_no_go_when_its_tier_blocks(tmp_path):
    policy = """
name: r
blocking: [critical]
evidence: {max_age_days: 14}
tiers:
  critical: [tiny_reviews_gen]
  advisory: [tiny_addition]
"""
    code, _, record, by = _release(tmp_path, policy, [MTP])
    assert record.verdict == "GO" and by["tiny_reviews_gen"].age_days == pytest.approx(
        4.15, abs=0.01)
    later = datetime(2026, 12, 20, tzinfo=timezone.utc)  # the run is 18.1 days old
    code, _, record, by = _release(tmp_path, policy, [MTP], as_of=later)
    assert (int(code), record.verdict) == (1, "NO-GO")
    assert by["tiny_reviews_gen"].status == by["tiny_addition"].status == "STALE"
    assert "18.1 days old (limit 14)" in by["tiny_reviews_gen"].reason
    assert record.reason == "stale evidence for tiny_reviews_gen"
    assert record.warnings == [f"advisory benchmark tiny_addition (not blocking): STALE, newest "
                               f"run {MTP.name} is stale: 18.1 days old (limit 14)"]
    code, _, record, _ = _release(tmp_path, """
name: r
evidence: {max_age_days: 14}
tiers:
  critical: [tiny_reviews_gen]
  advisory: [tiny_addition]
""", [MTP, MTP_LATER], as_of=datetime(2026, 12, 15, 21, tzinfo=timezone.utc))
    # 14.02 days against 13.94: the later run is fresh, the earlier one listed as stale
    assert record.verdict == "GO"
    gen = record.benchmarks[0]
    assert gen.run_id == MTP_LATER.name
    assert [o.why[:6] for o in gen.other_runs] == ["stale:"]


def test_an_advisory_regression_is_go_with_a_warning_and_a_critical_one_no_go(tmp_path):
    policy = """
name: r
evidence: {config_hash: f5ecc54a}
tiers:
  critical: [tiny_reviews_gen, tiny_reviews_mc]
  advisory: [tiny_addition]
"""
    code, _, record, by = _release(tmp_path, policy, [KV_FP8])
    assert (int(code), record.verdict) == (0, "GO")
    assert by["tiny_addition"].status == "REGRESSION"
    assert len(record.warnings) == 1 and record.warnings[0].startswith(
        "advisory benchmark tiny_addition (not blocking): REGRESSION")
    assert "1 warning(s)" in record.reason
    code, _, record, by = _release(tmp_path, policy.replace("tiny_reviews_mc]", "tiny_reviews_mc, "
                                   "tiny_addition]").replace("  advisory: [tiny_addition]\n",
                                                             ""), [KV_FP8])
    assert (int(code), record.verdict) == (1, "NO-GO")
    assert record.reason == "regression in tiny_addition"


def test_a_run_of_another_config_hash_is_mismatched(tmp_path):
    code, _, record, by = _release(tmp_path, """
name: r
evidence: {config_hash: 0c0dac60}
tiers:
  critical: [tiny_reviews_gen]
""", [KV_FP8])
    assert (int(code), record.verdict) == (1, "NO-GO")
    gen = by["tiny_reviews_gen"]
    assert gen.status == "MISMATCHED" and gen.run_id == KV_FP8.name
    assert gen.reason == "newest run gpu-kv-fp8-f5ecc54a is mismatched: config hash f5ecc54a, " \
                         "not 0c0dac60"
    for rule, why in (("vllm: '0.27'", "vLLM 0.26.0, not 0.27"),
                      ("hardware: H100", "hardware Intel(R) Xeon(R) Processor (x86_64, 16 "
                                         "CPUs): AVX-512 with AMX; NVIDIA H200 143771 MiB, not "
                                         "H100"),
                      ("deployment: gpu-mtp-prefix", "deployment gpu-kv-fp8, not gpu-mtp-prefix")):
        _, _, record, by = _release(tmp_path, f"name: r\nevidence: {{{rule}}}\ntiers:\n  "
                                    "critical: [tiny_reviews_gen]\n", [KV_FP8])
        assert by["tiny_reviews_gen"].status == "MISMATCHED", rule
        assert by["tiny_reviews_gen"].reason.endswith(why), rule
    _, _, record, _ = _release(tmp_path, "name: r\nevidence: {vllm: '0.26', hardware: h200, "
                               "exercised: true}\ntiers:\n  critical: [tiny_reviews_gen]\n",
                               [KV_FP8])
    assert record.verdict == "GO"


def test_two_runs_of_one_benchmark_the_newest_matching_is_used_the_other_listed(tmp_path):
    _, _, record, by = _release(tmp_path, """
name: r
evidence: {deployment: gpu-mtp-prefix}
tiers:
  critical: [tiny_reviews_shared_prefix]
""", [MTP, MTP_LATER, KV_FP8])
    b = by["tiny_reviews_shared_prefix"]
    assert b.run_id == MTP_LATER.name
    assert [(o.run_id, o.why) for o in b.other_runs] == [
        (KV_FP8.name, "mismatched: deployment gpu-kv-fp8, not gpu-mtp-prefix"),
        (MTP.name, f"older than {MTP_LATER.name}")]
    later = {t.task: t for t in read_run_record(MTP_LATER).tasks}
    assert b.delta == later["tiny_reviews_shared_prefix"].delta  # not averaged with MTP's


def test_holm_over_the_blocking_family_matches_the_run_and_statsmodels(tmp_path):
    """All four tasks block, as they gated the KV-FP8 run: the release's Holm-adjusted
    p-values are the run's own and statsmodels'."""
    _, _, record, by = _release(tmp_path, "name: r\ntiers:\n  critical: [" + ", ".join(TASKS)
                                + "]\n", [KV_FP8])
    run = {t.task: t for t in read_run_record(KV_FP8).tasks}
    raw = [run[t].regression_pvalue for t in TASKS]
    reference = multipletests(raw, alpha=0.05, method="holm")[1]
    for task, ref in zip(TASKS, reference):
        assert by[task].regression_pvalue_adjusted == pytest.approx(ref, rel=1e-12)
        assert by[task].regression_pvalue_adjusted == pytest.approx(
            run[task].regression_pvalue_adjusted, rel=1e-12)
    assert by["tiny_addition"].status == "REGRESSION"
    _, _, record, by = _release(tmp_path, "name: r\ncorrection: none\ntiers:\n  critical: ["
                                + ", ".join(TASKS) + "]\n", [KV_FP8])
    assert [by[t].regression_pvalue_adjusted for t in TASKS] == pytest.approx(raw, rel=1e-12)


def _tango_p(n12: int, n21: int, n: int, margin: float) -> float:
    """Tango (1998) eq. 6 and the score statistic, written out here as the reference."""
    d0 = -margin
    a, b = 2 * n, -n12 - n21 + (2 * n - n12 + n21) * d0
    c = -n21 * d0 * (1 - d0)
    q = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    z = (n12 - n21 - n * d0) / math.sqrt(n * (2 * q + d0 * (1 - d0)))
    return float(norm.sf(z))


def _facts(run_id: str, tasks: list[TaskResult], created=AS_OF) -> RunFacts:
    return RunFacts(run_id=run_id, created=created, source=run_id, report=None,
                    config_hash="0123abcd", deployment="d", vllm="0.26.0", hardware="H200",
                    not_exercised=(), alpha=0.05, tasks=tuple(tasks))


def _binary(task: str, n: int, c2w: int, w2c: int, base: float) -> TaskResult:
    return TaskResult(task=task, metric="acc", binary=True, clustered=False, n=n,
                      correct_to_wrong=c2w, wrong_to_correct=w2c, baseline_mean=base,
                      candidate_mean=base + (w2c - c2w) / n, delta=(w2c - c2w) / n,
                      ci_low=None, ci_high=None, ci_method=None, regression_pvalue=None,
                      regression_test=None)


def test_the_relative_guard_judges_a_low_baseline_benchmark_on_its_relative_drop():
    # 5% baseline; 6 items lost and 2 won of 1000 (-0.4 points): within 3 points, but not
    # shown within 10% of the baseline (0.5 points)
    runs = [_facts("a", [_binary("rare", 1000, 6, 2, 0.05)])]
    absolute = parse_policy({"name": "r", "tiers": {"critical": [
        {"task": "rare", "margin": 0.03}]}}, Path("p.yaml"))
    both = parse_policy({"name": "r", "tiers": {"critical": [
        {"task": "rare", "margin": 0.03, "relative_margin": 0.1}]}}, Path("p.yaml"))
    one = decide_release(absolute, runs, AS_OF).benchmarks[0]
    two = decide_release(both, runs, AS_OF).benchmarks[0]
    assert one.status is Status.PASS and one.margin == 0.03
    assert two.status is Status.INCONCLUSIVE and two.margin == pytest.approx(0.005)
    assert one.noninferiority_pvalue == pytest.approx(_tango_p(2, 6, 1000, 0.03), rel=1e-9)
    assert two.noninferiority_pvalue == pytest.approx(_tango_p(2, 6, 1000, 0.005), rel=1e-9)
    assert decide_release(both, runs, AS_OF).verdict.value == "INCONCLUSIVE"


def test_tiers_that_do_not_block_are_screened_with_benjamini_hochberg():
    tasks = [_binary(f"t{i}", 400, c, 2, 0.8) for i, c in enumerate((14, 11, 9, 5))]
    policy = parse_policy({"name": "r", "tiers": {"critical": ["t0"], "advisory": [
        "t1", "t2", "t3"]}}, Path("p.yaml"))
    decision = decide_release(policy, [_facts("a", tasks)], AS_OF)
    by = {b.benchmark: b for b in decision.benchmarks}
    raw = [by[t].regression_pvalue for t in ("t1", "t2", "t3")]
    reference = multipletests(raw, alpha=0.05, method="fdr_bh")[1]
    assert [by[t].regression_pvalue_adjusted for t in ("t1", "t2", "t3")] == pytest.approx(
        list(reference), rel=1e-12)
    assert by["t0"].regression_pvalue_adjusted == by["t0"].regression_pvalue  # alone


@pytest.mark.parametrize("text, message", [
    ("name: r\ntiers: {critical: [a]}\nmargins: 1\n", "unknown key `margins`"),
    ("name: r\ntiers: {critical: [{task: a, marginn: 0.1}]}\n",
     "unknown key `tiers.critical.0.marginn`"),
    ("name: r\ntiers: {critical: [a], advisory: [{task: a, metric: acc}]}\n",
     "`tiers.advisory`: benchmark `a:acc` is already listed in `tiers.critical`"),
    ("name: r\ntiers: {critical: [{task: a, margin: 1.5}]}\n",
     "`tiers.critical.0.margin`: margin must lie strictly between 0 and 1"),
    ("name: r\ntiers: {critical: [{task: a, relative_margin: 0}]}\n",
     "`tiers.critical.0.relative_margin`: relative_margin must lie strictly between 0 and 1"),
    ("name: r\ntiers: {advisory: [a]}\n", "`blocking`: no benchmark is in a blocking tier"),
    ("name: r\nname: s\ntiers: {critical: [a]}\n", "the key `name` is given twice"),
    ("name: r\ncorrection: bonferroni\ntiers: {critical: [a]}\n", "`correction`"),
    ("name: r\ntiers: {critical: [a]}\nevidence: {config_hash: 0c0dac60, deployment: d}\n",
     "give `config_hash` or `deployment`, not both"),
    ("name: r\ntiers: {critical: [a]}\nx: !!python/object/apply:os.system ['true']\n",
     "not valid YAML"),
    ("name: r\ndefaults: {}\ntiers: {critical: [a]}\n",
     "`defaults`: give `margin` and/or `relative_margin`"),
    ("name: r\ntiers: {critical: [a]}\nevidence: {max_age_days: 0}\n",
     "`evidence.max_age_days`"),
    ("name: 'a b'\ntiers: {critical: [a]}\n", "`name`"),
])
def test_a_bad_policy_is_one_line_naming_the_file_and_key(tmp_path, capsys, text, message):
    path = _policy(tmp_path, text)
    assert main(["release", str(path), str(MTP), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {path}: ") and message in err


def test_a_run_dir_that_is_not_a_run_or_too_new_is_one_line(tmp_path, capsys):
    policy = str(_policy(tmp_path, "name: r\ntiers: {critical: [tiny_reviews_gen]}\n"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["release", policy, str(empty), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == (f"error: {empty}: no summary.json; is this a run "
                                       "directory under reports/?\n")
    newer = tmp_path / "newer"
    shutil.copytree(MTP, newer)
    data = json.loads((newer / "summary.json").read_text())
    data["schema_version"] = 99
    (newer / "summary.json").write_text(json.dumps(data))
    assert main(["release", policy, str(newer), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{newer}/summary.json: schema_version 99 is newer" in err
    assert not (tmp_path / "o").exists()
    assert main(["release", policy, str(MTP), "--out", str(tmp_path / "o"),
                 "--as-of", "next week"]) == 2
    assert "--as-of takes an ISO 8601 time" in capsys.readouterr().err
    assert main(["release", policy, str(MTP), "--store", str(tmp_path / "s")]) == 2
    assert "give run directories or --store, not both" in capsys.readouterr().err


def test_a_newer_release_record_is_refused(tmp_path):
    code, out, record, _ = _release(tmp_path, EXAMPLE.read_text(), [MTP])
    data = json.loads((out / RELEASE_FILE).read_text())
    assert list(data)[0] == "schema_version" and data["kind"] == "release"
    data["schema_version"] = 2
    (out / RELEASE_FILE).write_text(json.dumps(data))
    with pytest.raises(Exception, match="schema_version 2 is newer than this suite reads"):
        read_release_record(out)


def test_the_page_and_markdown_escape_what_the_policy_and_runs_say(tmp_path):
    _, out, record, _ = _release(tmp_path, """
name: r
tiers:
  critical: [tiny_reviews_gen]
  advisory: ['<script>alert(1)</script>|**x**']
""", [MTP])
    assert record.verdict == "GO" and "MISSING" in record.warnings[0]
    page = (out / "release.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "script-src &#39;none&#39;" in page and "default-src &#39;none&#39;" in page
    assert " src=" not in page and "http://" not in page and "https://" not in page
    md = (out / "release.md").read_text()
    assert "| &lt;script&gt;alert(1)&lt;/script&gt;\\|\\*\\*x\\*\\* | advisory" in md
    assert "<script>" not in md and "|**x**" not in md
    suite = ET.parse(out / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "0")
    etree = pytest.importorskip("lxml.etree", reason="XSD validation needs lxml")
    schema = etree.XMLSchema(etree.parse(str(ROOT / "tests" / "report" / "schemas" /
                                             "junit-10.xsd")))
    assert schema.validate(etree.parse(str(out / "junit.xml"))), schema.error_log


def test_ci_outputs_as_ab_has_them(tmp_path):
    _, out, record, _ = _release(tmp_path, """
name: r
evidence: {config_hash: f5ecc54a}
tiers:
  critical: [tiny_reviews_gen, tiny_addition]
  advisory: [tiny_reviews_mc, tiny_reviews_multiturn]
""", [KV_FP8])
    assert record.verdict == "NO-GO"
    summary, dotenv, lines = tmp_path / "step.md", tmp_path / "v.env", []
    publish_release(record, out, environ={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY":
                                          str(summary), "GITLAB_CI": "1",
                                          "EVALS_DOTENV": str(dotenv)}, echo=lines.append)
    assert summary.read_text().startswith("## vllm-regression-evals: release NO-GO (exit "
                                          "code 1)")
    assert lines[0].startswith("::error title=vllm-regression-evals%3A release NO-GO (exit "
                               "1)::release-r: regression in tiny_addition")
    assert lines[1].startswith("::error title=REGRESSION%3A tiny_addition::dropped -2.9 pts")
    assert lines[2].startswith("::warning title=vllm-regression-evals%3A release warning::"
                               "advisory benchmark tiny_reviews_multiturn (not blocking): "
                               "MISSING")
    assert lines[3:] == [f"junit: {out / 'junit.xml'}", f"dotenv: {dotenv}"]
    assert dotenv.read_text().splitlines() == [
        "EVALS_VERDICT=NO-GO", "EVALS_EXIT_CODE=1", "EVALS_RUN_ID=release-r",
        f"EVALS_REPORT={out / 'release.html'}"]
    root = ET.parse(out / "junit.xml").getroot()
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["tiny_addition"] and root.get("failures") == "1"
    passing = [c.get("name") for c in root.iter("testcase") if c.find("failure") is None]
    assert passing == ["tiny_reviews_gen", "tiny_reviews_mc (not blocking)",
                       "tiny_reviews_multiturn (not blocking)"]


def test_the_run_store_is_the_default_source(tmp_path, monkeypatch):
    from evals.store import RunStore

    store = RunStore(tmp_path / "store")
    for run in (MTP, KV_FP8):
        copy = tmp_path / "reports" / run.name
        shutil.copytree(run, copy)
        store.record_run(copy)
    monkeypatch.delenv("EVALS_STORE", raising=False)
    code, out, record = run_release(
        _policy(tmp_path, "name: r\nevidence: {deployment: gpu-kv-fp8}\ntiers:\n  critical: "
                "[tiny_reviews_gen, tiny_addition]\n"), [], store_root=tmp_path / "store",
        reports_dir=tmp_path / "reports", as_of=AS_OF, echo=lambda *_: None)
    assert out == tmp_path / "reports" / "release-r"
    assert record.verdict == "NO-GO" and sorted(Path(r).name for r in record.runs) == sorted(
        [MTP.name, KV_FP8.name])
    by = {b.benchmark: b for b in record.benchmarks}
    assert by["tiny_addition"].status == "REGRESSION" and by["tiny_addition"].run_id == \
        KV_FP8.name
    assert [o.run_id for o in by["tiny_reviews_gen"].other_runs] == [MTP.name]


def test_release_imports_no_engine_no_lm_eval(tmp_path):
    """A reader of finished runs: no torch, vLLM, lm-eval or transformers in the process."""
    code = (f"import sys; from evals.cli import main; rc = main(['release', {str(EXAMPLE)!r}, "
            f"{str(MTP)!r}, '--out', {str(tmp_path / 'o')!r}, '--as-of', '2026-12-06']); "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'vllm', "
            "'lm_eval', 'transformers', 'pyarrow'}); print(rc, heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip().splitlines()[-1]
    assert out == "0 []"


def test_the_example_policy_loads():
    policy = load_policy(EXAMPLE)
    assert [t for t, _ in policy.benchmarks()] == ["critical", "critical", "supporting",
                                                   "advisory"]


# -- NeMo Evaluator's `nel gate` on the same items (tests/fixtures/nel_gate) --------------

NEL = json.loads((ROOT / "tests" / "fixtures" / "nel_gate" / "reference.json").read_text())
# (nel's status, ours) per case and benchmark, all critical at margin 0.03
EXPECTED = {
    ("gpu-mtp-prefix", "tiny_addition"): ("PASS", "PASS"),
    ("gpu-mtp-prefix", "tiny_reviews_gen"): ("PASS", "PASS"),
    ("gpu-mtp-prefix", "tiny_reviews_mc"): ("PASS", "PASS"),
    ("gpu-mtp-prefix", "tiny_reviews_shared_prefix"): ("PASS", "PASS"),
    ("gpu-kv-fp8", "tiny_addition"): ("INSUFFICIENT_EVIDENCE", "REGRESSION"),
    ("gpu-kv-fp8", "tiny_reviews_gen"): ("PASS", "PASS"),
    ("gpu-kv-fp8", "tiny_reviews_mc"): ("PASS", "PASS"),
    ("gpu-kv-fp8", "tiny_reviews_shared_prefix"): ("PASS", "PASS"),
    ("gpu-w4a16", "tiny_addition"): ("BREACH", "REGRESSION"),
    ("gpu-w4a16", "tiny_reviews_gen"): ("PASS", "PASS"),
    ("gpu-w4a16", "tiny_reviews_mc"): ("PASS", "PASS"),
    ("gpu-w4a16", "tiny_reviews_shared_prefix"): ("PASS", "PASS"),
    ("cpu-w4a16", "tiny_addition"): ("INSUFFICIENT_EVIDENCE", "REGRESSION"),
    ("cpu-w4a16", "tiny_reviews_gen"): ("PASS", "PASS"),
    ("cpu-w4a16", "tiny_reviews_mc"): ("PASS", "PASS"),
    ("cpu-w4a16", "tiny_reviews_shared_prefix"): ("PASS", "PASS"),
    ("null", "tiny_reviews_gen"): ("PASS", "PASS"),
    ("noised-2pct", "tiny_reviews_gen"): ("PASS", "REGRESSION"),
    ("noised-5pct", "tiny_reviews_gen"): ("BREACH", "REGRESSION"),
}


def _ours(tables: dict[str, dict[str, int]]) -> dict:
    tasks = []
    for name, t in tables.items():
        n = sum(t.values())
        tasks.append(_binary(name, n, t["correct_to_wrong"], t["wrong_to_correct"],
                             (t["both_correct"] + t["correct_to_wrong"]) / n))
    policy = parse_policy({"name": "nel", "defaults": {"margin": NEL["policy"]["defaults"][
        "max_drop"]}, "tiers": {"critical": sorted(tables)}}, Path("p.yaml"))
    return {b.benchmark: b for b in decide_release(policy, [_facts("a", tasks)],
                                                    AS_OF).benchmarks}


def test_per_benchmark_decisions_agree_with_nel_gate_where_both_decide():
    """nel gate (NeMo Evaluator 0.3.0) PASSes a benchmark whose 95% t-interval of the paired
    deltas lies above -max_drop and BREACHes one whose interval lies below it. Where it
    decides, so do we, alike - except by design where it PASSes or cannot decide a drop
    that is significant but not shown to exceed the margin: that is a REGRESSION here (a
    drop the data prove, whatever its size, as the run gate says), never a PASS."""
    assert (NEL["nemo_evaluator"], NEL["python"][:4]) == ("0.3.0", "3.12")
    found = {}
    for case, data in NEL["cases"].items():
        ours = _ours(data["tables"])
        assert sorted(ours) == sorted(data["benchmarks"]), case
        for name, theirs in data["benchmarks"].items():
            mine = ours[name]
            assert theirs["n_paired"] == mine.n
            assert theirs["delta"] == pytest.approx(mine.delta, abs=5e-7)  # the same items
            found[(case, name)] = (theirs["status"], mine.status.value)
            if (theirs["status"], mine.status.value) in (("PASS", "PASS"),
                                                         ("BREACH", "REGRESSION")):
                continue
            # the differences by design: a significant drop nel does not place beyond the
            # margin (its interval's upper end above -max_drop)
            assert mine.status is Status.REGRESSION and mine.regression_pvalue_adjusted < 0.05
            assert theirs["delta_ci_upper"] > -NEL["policy"]["defaults"]["max_drop"]
    assert found == EXPECTED


def test_the_committed_example_page_is_what_the_example_policy_gives(tmp_path, monkeypatch):
    """examples/release/page/ (docs/release.md's example) rebuilt with the command it came from."""
    monkeypatch.chdir(ROOT)
    shipped = ROOT / "examples" / "release" / "page"
    runs = sorted(str(p.relative_to(ROOT)) for p in _gpu_runs()) + [
        str(MTP_LATER.relative_to(ROOT))]
    assert main(["release", str(EXAMPLE.relative_to(ROOT)), *runs, "--as-of", "2026-12-06",
                 "--out", str(tmp_path / "page")]) == 0
    assert (tmp_path / "page" / "release.md").read_text() == \
        (shipped / "release.md").read_text()
    rebuilt, kept = (json.loads((d / RELEASE_FILE).read_text()) for d in (tmp_path / "page",
                                                                           shipped))
    assert {**rebuilt, "created": None, "runs": None} == {**kept, "created": None,
                                                          "runs": None}
    assert sorted(rebuilt["runs"]) == sorted(kept["runs"])


def test_a_task_that_is_not_binary_keeps_its_runs_interval_at_the_runs_alpha():
    scored = TaskResult(task="f1", metric="f1", binary=False, clustered=False, n=500,
                        correct_to_wrong=None, wrong_to_correct=None, baseline_mean=0.6,
                        candidate_mean=0.59, delta=-0.01, ci_low=-0.025, ci_high=0.005,
                        ci_method="paired t (90%)", regression_pvalue=0.08,
                        regression_test="paired t, one-sided")
    policy = {"name": "r", "tiers": {"critical": [{"task": "f1", "margin": 0.03}]}}
    run = _facts("a", [scored])
    b = decide_release(parse_policy(policy, Path("p.yaml")), [run], AS_OF).benchmarks[0]
    assert (b.status, b.ci_low, b.noninferiority_pvalue) == (Status.PASS, -0.025, None)
    narrow = {**policy, "tiers": {"critical": [{"task": "f1", "margin": 0.02}]}}
    b = decide_release(parse_policy(narrow, Path("p.yaml")), [run], AS_OF).benchmarks[0]
    assert b.status is Status.INCONCLUSIVE and "reaches below -2.0 pts" in b.reason
    other_alpha = parse_policy({**policy, "alpha": 0.025}, Path("p.yaml"))
    b = decide_release(other_alpha, [run], AS_OF).benchmarks[0]
    assert b.status is Status.INCONCLUSIVE and "not at the policy's alpha 0.025" in b.reason


def test_exercise_evidence_is_required_when_the_policy_says_so():
    tasks = [_binary("t", 400, 0, 0, 0.8)]
    policy = parse_policy({"name": "r", "evidence": {"exercised": True},
                           "tiers": {"critical": ["t"]}}, Path("p.yaml"))
    engaged = _facts("a", tasks)
    idle = RunFacts(**{**{f: getattr(engaged, f) for f in RunFacts.__slots__},
                       "run_id": "b", "not_exercised": ("prefix caching",)})
    undeclared = RunFacts(**{**{f: getattr(engaged, f) for f in RunFacts.__slots__},
                             "run_id": "c", "not_exercised": None})
    assert decide_release(policy, [engaged], AS_OF).verdict.value == "GO"
    b = decide_release(policy, [idle], AS_OF).benchmarks[0]
    assert b.status is Status.MISMATCHED and b.reason.endswith(
        "not exercised: prefix caching never engaged")
    b = decide_release(policy, [undeclared], AS_OF).benchmarks[0]
    assert b.status is Status.MISMATCHED and "no exercise evidence" in b.reason
