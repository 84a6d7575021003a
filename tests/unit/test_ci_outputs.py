"""What CI systems read from a finished run (evals.report.ci_outputs), with the CI
systems' environment variables set: GitHub's job summary and annotations, GitLab's JUnit
path and dotenv, the one-line verdict of `gate-config`, and the failures that end a run
without a verdict. Runs are written by the suite's own writers (tests/synthetic_runs.py,
evals.report.write_reports)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ci_workflows import annotations
from synthetic_runs import PlantedTask, write_synthetic_run

from evals.errors import ExitCode
from evals.record.run_record_model import RunRecord
from evals.report import write_reports
from evals.report.ci_outputs import (dotenv_text, publish_failure, publish_run, verdict_line,
                                     workflow_command)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "lm_eval_run"
NASTY = "odd%task,name: 50%\nnext::error::pwned\r"


def _run(tmp_path: Path, name: str, *tasks: PlantedTask) -> Path:
    verdicts = {t.verdict for t in tasks}
    reason = ("regression in tiny_addition" if "REGRESSION" in verdicts else
              "cannot show non-inferiority" if "INCONCLUSIVE" in verdicts else
              "every gated task is non-inferior at the margin")
    run_dir = write_synthetic_run(tmp_path / name, run_id=name, created="2026-11-30T10:00:00+00:00",
                                  tasks=list(tasks), rng=np.random.default_rng(7), text=False,
                                  extra={"reason": reason})
    write_reports(run_dir)
    return run_dir


@pytest.fixture()
def regression_run(tmp_path) -> Path:
    return _run(tmp_path, "ci-regression",
                PlantedTask("tiny_addition", 200, 30, 2, verdict="REGRESSION"),
                PlantedTask(NASTY, 200, 6, 5, verdict="INCONCLUSIVE"),
                PlantedTask("tiny_reviews_gen", 200, 1, 1, verdict="PASS"))


@pytest.fixture()
def passing_run(tmp_path) -> Path:
    return _run(tmp_path, "ci-pass", PlantedTask("tiny_addition", 200, 1, 1, verdict="PASS"))


class Printed(list):
    def __call__(self, line: str) -> None:
        self.append(line)


def _publish(run_dir: Path, env: dict) -> tuple[Printed, Printed]:
    out, warned = Printed(), Printed()
    publish_run(run_dir, environ=env, echo=out, warn=warned)
    return out, warned


def test_outside_ci_nothing_is_written_or_printed(regression_run, tmp_path):
    before = sorted(p.name for p in regression_run.iterdir())
    out, warned = _publish(regression_run, {"EVALS_DOTENV": str(tmp_path / "v.env"),
                                            "GITHUB_ACTIONS": "false"})
    assert out == [] and warned == []
    assert sorted(p.name for p in regression_run.iterdir()) == before
    assert not (tmp_path / "v.env").exists()


def test_a_job_summary_file_alone_gets_the_summary_but_no_annotations(passing_run, tmp_path):
    summary = tmp_path / "s.md"
    out, warned = _publish(passing_run, {"GITHUB_STEP_SUMMARY": str(summary)})
    assert out == [] and warned == []
    assert summary.read_text(encoding="utf-8") == \
        (passing_run / "summary.md").read_text(encoding="utf-8").rstrip("\n") + "\n\n"


def test_github_appends_summary_md_to_the_job_summary(regression_run, tmp_path):
    summary = tmp_path / "step_summary.md"
    summary.write_text("## an earlier step\n\n", encoding="utf-8")
    _publish(regression_run, {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    markdown = (regression_run / "summary.md").read_text(encoding="utf-8")
    assert summary.read_text(encoding="utf-8") == "## an earlier step\n\n" + markdown + "\n"
    assert markdown.startswith("## vllm-regression-evals: REGRESSION\n")


def test_github_annotations_state_the_verdict_and_each_failing_gated_task(regression_run):
    out, _ = _publish(regression_run, {"GITHUB_ACTIONS": "true"})
    summary = json.loads((regression_run / "summary.json").read_text(encoding="utf-8"))
    found = annotations("\n".join(out))
    assert len(found) == len(out) == 3
    assert summary["reason"] == "regression in tiny_addition"
    assert found[0] == ("error", "vllm-regression-evals: REGRESSION (exit 1)",
                        "ci-regression: regression in tiny_addition")
    assert found[1] == ("error", "REGRESSION: tiny_addition", "planted")
    # the task name comes back whole after unescaping: nothing of it ended the command
    assert found[2] == ("warning", f"INCONCLUSIVE: {NASTY.replace(chr(13), chr(92) + 'x0d')}",
                        "planted")


def test_a_task_name_cannot_start_another_workflow_command(regression_run):
    out, _ = _publish(regression_run, {"GITHUB_ACTIONS": "true"})
    for line in out:
        assert "\n" not in line and "\r" not in line
        assert line.count("::") == 2  # `::level title=...::message`, nothing more
    assert "%0Anext%3A%3Aerror%3A%3Apwned" in out[2]
    assert "odd%25task%2Cname%3A 50%25" in out[2]


def test_pass_is_a_notice_and_the_summary_is_appended(passing_run, tmp_path):
    summary = tmp_path / "s.md"
    out, _ = _publish(passing_run, {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert annotations("\n".join(out)) == [
        ("notice", "vllm-regression-evals: PASS (exit 0)",
         "ci-pass: every gated task is non-inferior at the margin")]
    assert "**Verdict: PASS**" in summary.read_text(encoding="utf-8")


def test_workflow_command_escaping_matches_the_actions_toolkit():
    """`%` and newlines as @actions/core escapes them (in titles also `:` and `,`); other
    control characters, CR included, are shown as text escapes first (text_hygiene)."""
    assert workflow_command("error", "a%b\nc:d,e\x1b[2J", "t:i,t%le\n") == \
        "::error title=t%3Ai%2Ct%25le%0A::a%25b%0Ac:d,e\\x1b[2J"
    assert workflow_command("warning", "x\ry", "t") == "::warning title=t::x\\x0dy"


def test_gitlab_gets_the_junit_path_and_a_dotenv_in_the_run_directory(regression_run,
                                                                        monkeypatch):
    monkeypatch.chdir(regression_run.parent)
    out, warned = _publish(regression_run, {"GITLAB_CI": "true"})
    assert warned == []
    assert out == ["junit: ci-regression/junit.xml", "dotenv: ci-regression/verdict.env"]
    assert (regression_run / "verdict.env").read_text(encoding="utf-8") == (
        "EVALS_VERDICT=REGRESSION\nEVALS_EXIT_CODE=1\nEVALS_RUN_ID=ci-regression\n"
        "EVALS_REPORT=ci-regression/report.html\n")


def test_gitlab_dotenv_goes_where_evals_dotenv_names(passing_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out, _ = _publish(passing_run, {"GITLAB_CI": "true", "EVALS_DOTENV": "verdict.env"})
    assert out[-1] == "dotenv: verdict.env"
    assert (tmp_path / "verdict.env").read_text(encoding="utf-8").splitlines()[:2] == [
        "EVALS_VERDICT=PASS", "EVALS_EXIT_CODE=0"]
    assert not (passing_run / "verdict.env").exists()


def test_dotenv_values_stay_on_one_line_without_expansions():
    assert dotenv_text({"A": "x y\n$HOME 'q'", "B": 3}) == "A=x_y__HOME__q_\nB=3\n"


def test_an_unwritable_job_summary_is_a_warning_not_a_failure(passing_run, tmp_path):
    out, warned = _publish(passing_run, {"GITHUB_ACTIONS": "true",
                                         "GITHUB_STEP_SUMMARY": str(tmp_path)})  # a directory
    assert len(warned) == 1 and "could not append to $GITHUB_STEP_SUMMARY" in warned[0]
    assert annotations("\n".join(out))[0][0] == "notice"


def test_a_damaged_summary_gives_a_warning_and_no_outputs(passing_run, tmp_path):
    data = json.loads((passing_run / "summary.json").read_text(encoding="utf-8"))
    data["exit_code"] = 0 if data["verdict"] != "PASS" else 1
    (passing_run / "summary.json").write_text(json.dumps(data), encoding="utf-8")
    out, warned = _publish(passing_run, {"GITHUB_ACTIONS": "true", "GITLAB_CI": "true"})
    assert out == [] and len(warned) == 1
    assert "exit_code 1 does not match verdict PASS" in warned[0]


def test_failures_without_a_verdict(tmp_path):
    summary = tmp_path / "s.md"
    out, warned = Printed(), Printed()
    publish_failure(ExitCode.BAD_INPUT, "configs/x.yaml: unknown key `arms.candidate.engin`",
                    environ={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
                             "GITLAB_CI": "true", "EVALS_DOTENV": str(tmp_path / "v.env")},
                    echo=out, warn=warned)
    assert annotations(out[0]) == [("error", "vllm-regression-evals: bad input (exit 2)",
                                    "configs/x.yaml: unknown key `arms.candidate.engin`")]
    assert summary.read_text(encoding="utf-8") == (
        "## vllm-regression-evals: bad input (exit code 2)\n\n"
        "configs/x.yaml: unknown key \\`arms.candidate.engin\\`\n\n")
    assert (tmp_path / "v.env").read_text(encoding="utf-8") == \
        "EVALS_VERDICT=BAD_INPUT\nEVALS_EXIT_CODE=2\n"
    out.clear()
    publish_failure(ExitCode.RUN_FAILED, "engine crashed", environ={"GITHUB_ACTIONS": "true"},
                    echo=out, warn=warned)
    assert annotations(out[0]) == [("error", "vllm-regression-evals: run failed (exit 4)",
                                    "engine crashed")]
    assert warned == []


def test_verdict_line(regression_run):
    summary = json.loads((regression_run / "summary.json").read_text(encoding="utf-8"))
    line = verdict_line(RunRecord.model_validate(summary), regression_run)
    assert line == f"REGRESSION exit=1 ci-regression: {summary['reason']}"


# -- the command line, with the variables in the environment ------------------------------

def _cli(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evals", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=300)


def test_compare_under_github_actions_writes_the_summary_and_annotates(tmp_path):
    summary = tmp_path / "step_summary.md"
    result = _cli("compare", str(FIXTURE), str(FIXTURE), "--reports", str(tmp_path / "r"),
                  env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.returncode == 3, result.stderr
    (run_dir,) = (tmp_path / "r").glob("compare-*")
    assert summary.read_text(encoding="utf-8") == \
        (run_dir / "summary.md").read_text(encoding="utf-8").rstrip("\n") + "\n\n"
    found = annotations(result.stdout)
    assert found[0][:2] == ("warning", "vllm-regression-evals: INCONCLUSIVE (exit 3)")
    assert found[0][2].startswith(f"{run_dir.name}: cannot show non-inferiority for ")


def test_bad_input_under_github_actions_and_gitlab(tmp_path):
    summary = tmp_path / "step_summary.md"
    result = _cli("compare", str(tmp_path / "missing"), str(FIXTURE), "--reports",
                  str(tmp_path / "r"), env={"GITHUB_ACTIONS": "true",
                                            "GITHUB_STEP_SUMMARY": str(summary),
                                            "GITLAB_CI": "true",
                                            "EVALS_DOTENV": str(tmp_path / "v.env")})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    message = result.stderr.strip().removeprefix("error: ")
    assert annotations(result.stdout) == [
        ("error", "vllm-regression-evals: bad input (exit 2)", message)]
    assert summary.read_text(encoding="utf-8").startswith(
        "## vllm-regression-evals: bad input (exit code 2)\n\n")
    assert (tmp_path / "v.env").read_text(encoding="utf-8") == \
        "EVALS_VERDICT=BAD_INPUT\nEVALS_EXIT_CODE=2\n"


def test_other_commands_leave_the_ci_alone(tmp_path):
    summary = tmp_path / "step_summary.md"
    result = _cli("runs", "--limit", "0", env={"GITHUB_ACTIONS": "true",
                                                "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.returncode == 2 and result.stdout == "" and not summary.exists()


# -- gate-config --------------------------------------------------------------------------

@pytest.mark.parametrize("fixture, code", [("regression_run", 1), ("passing_run", 0)])
def test_gate_config_prints_one_line_and_exits_with_the_runs_code(fixture, code, request):
    run_dir = request.getfixturevalue(fixture)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    for target in (run_dir, run_dir / "summary.json"):
        result = _cli("gate-config", str(target), env={"GITHUB_ACTIONS": "true"})
        assert result.returncode == code
        assert result.stdout == f"{summary['verdict']} exit={code} {run_dir.name}: " \
                                f"{summary['reason']}\n"
        assert result.stderr == ""


def test_reading_a_finished_run_imports_no_statistics(regression_run, tmp_path):
    """`gate-config` and `report` read a finished run; they import neither scipy (about a
    second of each call, evals.decide.outcome) nor anything that needs it: with scipy
    unimportable they answer as with it."""
    blocked = ("import sys; sys.modules.update(scipy=None); "
               "from evals.cli import main; sys.exit(main(sys.argv[1:]))")
    copy = tmp_path / "copy" / regression_run.name
    shutil.copytree(regression_run, copy)
    for args, code in ((["gate-config", str(copy)], 1), (["report", str(copy)], 0)):
        (copy / "report.html").unlink(missing_ok=True)
        plain = _cli(*args)
        without = subprocess.run([sys.executable, "-c", blocked, *args], capture_output=True,
                                 text=True, cwd=REPO, timeout=300)
        assert plain.returncode == code, plain.stderr[-2000:]
        assert (without.returncode, without.stdout, without.stderr) == \
            (plain.returncode, plain.stdout, plain.stderr), without.stderr[-2000:]
    assert (copy / "report.html").is_file()


def test_gate_config_inconclusive_exits_3(tmp_path):
    run_dir = _run(tmp_path, "ci-inc", PlantedTask("tiny_addition", 40, 2, 1,
                                                    verdict="INCONCLUSIVE"))
    result = _cli("gate-config", str(run_dir))
    assert result.returncode == 3 and result.stdout.startswith("INCONCLUSIVE exit=3 ci-inc: ")


def test_gate_config_reason_is_one_line_with_control_characters_shown(tmp_path, passing_run):
    data = json.loads((passing_run / "summary.json").read_text(encoding="utf-8"))
    data["reason"] = "line one\nline two \x1b[31m"
    (passing_run / "summary.json").write_text(json.dumps(data), encoding="utf-8")
    result = _cli("gate-config", str(passing_run))
    assert result.stdout == "PASS exit=0 ci-pass: line one line two \\x1b[31m\n"


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing", "no such run directory"),
    (lambda d: (d / "notes.txt").write_text("x") and d / "notes.txt",
     "name a run directory (reports/<run-id>) or its summary.json"),
    (lambda d: d, "no summary.json; is this a run directory"),
    (lambda d: (d / "summary.json").write_text("{\"a\": 1") and d, "not valid JSON"),
    (lambda d: (d / "summary.json").write_text("[1, 2]") and d, "summary.json"),
    (lambda d: (d / "summary.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "ab", "run_id": "r", "verdict": "MAYBE", "exit_code": 0,
         "reason": "", "gate": {}, "tasks": []})) and d, "verdict 'MAYBE' is none of"),
])
def test_gate_config_bad_input_is_one_line_and_exit_2(tmp_path, make, message):
    target = make(tmp_path)
    result = _cli("gate-config", str(target))
    assert result.returncode == 2, result.stdout
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr


def test_gate_config_refuses_a_code_that_is_not_the_verdicts(passing_run, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(passing_run, target)
    data = json.loads((target / "summary.json").read_text(encoding="utf-8"))
    data["exit_code"] = 3
    (target / "summary.json").write_text(json.dumps(data), encoding="utf-8")
    result = _cli("gate-config", str(target))
    assert result.returncode == 2
    assert "exit_code 3 does not match verdict PASS (exit 0)" in result.stderr


def _study(tmp_path: Path) -> Path:
    from synthetic_runs import study_record

    from evals.schemas import STUDY
    from evals.record.study_record import StudyRecord
    from evals.report.study import write_study_page

    study_dir = tmp_path / "study"
    record = study_record()
    arm = record["comparisons"][0]
    _run(study_dir / "comparisons", arm["arm"],
         PlantedTask("tiny_addition", 400, 30, 2, verdict="REGRESSION"))
    STUDY.write(study_dir / "study.json", record)
    write_study_page(StudyRecord.model_validate(STUDY.stamp(record)), study_dir / "study.html")
    return study_dir


def test_a_study_publishes_its_verdict_and_each_comparisons_annotations(tmp_path):
    from evals.report.ci_outputs import publish_study

    study_dir = _study(tmp_path)
    step_summary, dotenv = tmp_path / "step.md", tmp_path / "verdict.env"
    lines: list[str] = []
    publish_study(study_dir, {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(step_summary),
                              "GITLAB_CI": "true", "EVALS_DOTENV": str(dotenv)},
                  echo=lines.append)
    assert step_summary.read_text(encoding="utf-8").startswith(
        "## vllm-regression-evals study: REGRESSION")
    found = annotations("\n".join(lines))
    assert found[0][:2] == ("error", "vllm-regression-evals: study REGRESSION (exit 1)")
    assert ("error", "REGRESSION: tiny_addition") in [a[:2] for a in found[1:]]
    assert any(line.startswith("junit: ") and line.endswith("junit.xml") for line in lines)
    assert dotenv.read_text(encoding="utf-8").splitlines()[:2] == [
        "EVALS_VERDICT=REGRESSION", "EVALS_EXIT_CODE=1"]


def test_gate_config_reads_a_study(tmp_path):
    study_dir = _study(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "evals", "gate-config", str(study_dir)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "REGRESSION exit=1 s-1: regression in prefix_caching=on+decoding=mtp\n"
