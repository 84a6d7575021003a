"""The CI examples (examples/ci/) without an engine: the workflow files validate against
the CI systems' published schemas (tests/fixtures/ci_schemas/) and hold what each system
needs; gate.sh turns every exit code into the right job result; drift.sh refuses bad
settings before anything runs; changed_configs.py lists what a pull request changed.
The workflows' steps on real engines: tests/engine/test_ci_examples.py."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from ci_workflows import (EXAMPLES, GITHUB, GITLAB, REPO, ActionsCache, drift_week, github_step,
                          load_yaml, nox_shim, run_step, runner_environment, state_path,
                          step_environment, step_outputs, uploaded_paths)
from synthetic_runs import PlantedTask, write_synthetic_run

SCHEMAS = REPO / "tests" / "fixtures" / "ci_schemas"
RELEASE_GATE = GITHUB / "release-gate.yml"
WEEKLY_DRIFT = GITHUB / "weekly-drift.yml"
RELEASE_DECISION = GITHUB / "release-decision.yml"
RELEASE_COMMAND = ('examples/ci/release.sh nox -s release -- "$EVALS_POLICY" --reports '
                   '"$EVALS_REPORTS"')
GATE_COMMAND = 'examples/ci/gate.sh nox -s ab -- "$EVALS_CONFIG" --reports "$EVALS_REPORTS"'
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _validator(name: str):
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _errors(validator, document) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(document)]


# -- the published schemas ----------------------------------------------------------------

@pytest.mark.parametrize("path", [RELEASE_GATE, WEEKLY_DRIFT, RELEASE_DECISION])
def test_github_workflows_validate_against_schemastores_schema(path):
    validator = _validator("github-workflows.json")
    workflow = load_yaml(path)
    assert _errors(validator, workflow) == []
    broken = copy.deepcopy(workflow)  # the validator is live: a wrong key fails
    first_job = next(iter(broken["jobs"].values()))
    first_job["runs_on"] = first_job.pop("runs-on")
    assert _errors(validator, broken)


def test_gitlab_ci_validates_against_gitlabs_schema():
    validator = _validator("gitlab-ci.json")
    pipeline = load_yaml(GITLAB)
    assert _errors(validator, pipeline) == []
    broken = copy.deepcopy(pipeline)
    broken["release-gate"]["allow_failure"] = {"exit_codes": "three"}
    assert _errors(validator, broken)


# -- what each system needs -----------------------------------------------------------------

def _uses(workflow: dict) -> list[str]:
    return [s["uses"] for job in workflow["jobs"].values() for s in job["steps"] if "uses" in s]


@pytest.mark.parametrize("path", [RELEASE_GATE, WEEKLY_DRIFT, RELEASE_DECISION])
def test_every_action_is_pinned_to_a_commit_with_its_version_named(path):
    uses = _uses(load_yaml(path))
    assert uses and all(PINNED.match(u) for u in uses), uses
    for line in path.read_text(encoding="utf-8").splitlines():
        if "uses:" in line:
            assert re.search(r"@[0-9a-f]{40}\s+# v\d+\.\d+\.\d+$", line), line


@pytest.mark.parametrize("path", [RELEASE_GATE, WEEKLY_DRIFT, RELEASE_DECISION])
def test_every_job_has_a_runner_steps_and_a_timeout(path):
    workflow = load_yaml(path)
    assert workflow["on"] and workflow["permissions"] == {"contents": "read"}
    for name, job in workflow["jobs"].items():
        assert job["runs-on"] and job["steps"], name
        assert "timeout-minutes" in job or name == "changes", name
        for step in job["steps"]:
            assert ("run" in step) != ("uses" in step), step


def test_release_gate_runs_the_changed_configs_on_the_gpu_runner_and_a_cpu_smoke():
    workflow = load_yaml(RELEASE_GATE)
    assert workflow["on"] == {"pull_request": {"paths": ["configs/**"]}}
    jobs = workflow["jobs"]
    assert "changed_configs.py" in github_step(workflow, "changes", "list")["run"]
    gate, smoke = jobs["gate"], jobs["smoke"]
    assert gate["runs-on"] == ["self-hosted", "gpu"] and smoke["runs-on"] == "ubuntu-latest"
    assert gate["strategy"]["matrix"]["config"] == \
        "${{ fromJSON(needs.changes.outputs.configs) }}"
    assert "head.repo.full_name == github.repository" in gate["if"]  # no fork on the GPU runner
    assert gate["env"]["EVALS_CONFIG"] == "${{ matrix.config }}"
    assert smoke["env"]["EVALS_CONFIG"] == "configs/cpu/mtp_prefix.yaml"
    for job in ("gate", "smoke"):
        assert github_step(workflow, job, "gate")["run"] == GATE_COMMAND
        (upload,) = [s for s in jobs[job]["steps"] if "upload-artifact" in s.get("uses", "")]
        assert upload["if"] == "always()"
        for name in ("report.html", "junit.xml", "summary.json"):
            assert f"${{{{ env.EVALS_REPORTS }}}}/*/{name}" in upload["with"]["path"]
    # 3 passes, labelled for review; 1, 2 and 4 fail the job
    assert gate["env"]["EVALS_INCONCLUSIVE_EXIT"] == "0"
    (label,) = [s for s in gate["steps"] if "github-script" in s.get("uses", "")]
    assert label["if"] == "steps.gate.outputs.verdict == 'INCONCLUSIVE'"
    assert gate["permissions"]["pull-requests"] == "write"
    verdict = jobs["verdict"]  # the one required check: matrix job names change
    assert verdict["name"] == "release gate" and verdict["if"] == "always()"
    assert verdict["needs"] == ["changes", "smoke", "gate"]


@pytest.mark.parametrize("changes, configs, smoke, gate, code", [
    ("success", '["configs/a.yaml"]', "success", "success", 0),
    ("success", "[]", "success", "skipped", 0),  # no config changed: nothing to gate
    ("success", '["configs/a.yaml"]', "success", "skipped", 1),  # a fork: not gated, blocked
    ("success", '["configs/a.yaml"]', "success", "failure", 1),
    ("success", '["configs/a.yaml"]', "success", "cancelled", 1),
    ("success", "[]", "failure", "skipped", 1),
    ("failure", "", "success", "skipped", 1),
])
def test_the_required_check_passes_only_when_every_gate_did(tmp_path, changes, configs, smoke,
                                                           gate, code):
    workflow = load_yaml(RELEASE_GATE)
    step = github_step(workflow, "verdict", "verdict")
    env = runner_environment(tmp_path, "1", nox_shim(tmp_path / "bin"))
    env.update(step_environment(workflow, "verdict", step, {
        "CHANGES": changes, "CONFIGS": configs, "SMOKE": smoke, "GATE": gate}))
    result = run_step(step, env)
    assert result.returncode == code, result.stdout + result.stderr
    assert ("::error title=release gate::" in result.stdout) == (code == 1 and changes == "success"
                                                                 and smoke == "success")


def test_the_changes_step_lists_no_config_when_nothing_changed(tmp_path):
    workflow = load_yaml(RELEASE_GATE)
    step = github_step(workflow, "changes", "list")
    env = runner_environment(tmp_path, "1", nox_shim(tmp_path / "bin"))
    env.update(step_environment(workflow, "changes", step, {"EVALS_BASE_REF": "HEAD"}))
    result = run_step(step, env)
    assert result.returncode == 0, result.stderr
    assert step_outputs(env) == {"configs": "[]"}


def test_weekly_drift_restores_and_saves_its_state_around_the_drift_step():
    workflow = load_yaml(WEEKLY_DRIFT)
    assert workflow["on"]["schedule"][0]["cron"] and "workflow_dispatch" in workflow["on"]
    job = workflow["jobs"]["drift"]
    runners = [entry["runner"] for entry in job["strategy"]["matrix"]["include"]]
    assert "ubuntu-latest" in runners and ["self-hosted", "gpu"] in runners
    steps = job["steps"]
    kinds = [s.get("uses", "").split("@")[0] or s.get("id") for s in steps]
    restore, drift, save = (kinds.index("actions/cache/restore"), kinds.index("drift"),
                            kinds.index("actions/cache/save"))
    assert restore < drift < save
    assert steps[drift]["run"] == "examples/ci/drift.sh"
    assert steps[save]["if"] == "always()"  # a REGRESSION week is kept too
    restored, saved = steps[restore]["with"], steps[save]["with"]
    assert restored["path"] == saved["path"] == "${{ env.EVALS_STATE }}"
    assert restored["key"] == saved["key"] and restored["key"].startswith(restored["restore-keys"])
    assert "github.run_id" in restored["key"]  # a new entry every run; the prefix finds the last
    assert job["env"]["EVALS_STATE"].startswith("${{ github.workspace }}/")
    (upload,) = [s for s in steps if "upload-artifact" in s.get("uses", "")]
    assert "${{ env.EVALS_STATE }}/history.html" in upload["with"]["path"]


def _gitlab_jobs() -> dict[str, dict]:
    """Jobs with `extends` merged the way GitLab merges them (hashes deep, the rest replaced)."""
    pipeline = load_yaml(GITLAB)

    def merged(name: str) -> dict:
        job = pipeline[name]
        if "extends" not in job:
            return job
        base = merged(job["extends"])
        out = copy.deepcopy(base)
        for key, value in job.items():
            if key != "extends" and isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = {**out[key], **value}
            elif key != "extends":
                out[key] = value
        return out

    reserved = {"stages", "variables", "default", "include", "workflow"}
    return {name: merged(name) for name in pipeline
            if name not in reserved and not name.startswith(".")}


def test_gitlab_jobs_run_the_same_steps_with_junit_and_dotenv_reports():
    pipeline = load_yaml(GITLAB)
    jobs = _gitlab_jobs()
    assert set(jobs) == {"release-gate", "release-gate-smoke", "weekly-drift", "weekly-drift-smoke",
                         "release-decision"}
    assert pipeline["variables"]["EVALS_DOTENV"] == "verdict.env"
    release = jobs.pop("release-decision")  # a release needs a decision: 3 fails it too
    assert "allow_failure" not in release and release["script"] == [RELEASE_COMMAND]
    assert release["stage"] == "release" and release["tags"] == ["gpu"]
    assert release["artifacts"]["reports"] == {"junit": "reports/release/*/junit.xml",
                                               "dotenv": "verdict.env"}
    for name, job in jobs.items():
        assert job["stage"] in pipeline["stages"]
        assert job["allow_failure"] == {"exit_codes": [3]}  # INCONCLUSIVE: passed with warnings
        reports = job["artifacts"]["reports"]
        assert reports["dotenv"] == pipeline["variables"]["EVALS_DOTENV"]
        junit = reports["junit"] if isinstance(reports["junit"], list) else [reports["junit"]]
        assert all(j.endswith("junit.xml") for j in junit) and job["artifacts"]["when"] == "always"
        expected = GATE_COMMAND if name.startswith("release-gate") else "examples/ci/drift.sh"
        assert job["script"] == [expected], name
    for name in ("weekly-drift", "weekly-drift-smoke"):
        job = jobs[name]
        assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
        assert job["cache"]["key"] == "evals-drift-$EVALS_DEPLOYMENT"
        assert job["cache"]["when"] == "always"
        assert job["variables"]["EVALS_STATE"] == \
            f"$CI_PROJECT_DIR/{job['cache']['paths'][0].rstrip('/')}"
    assert jobs["release-gate"]["tags"] == ["gpu"] and "tags" not in jobs["release-gate-smoke"]


def test_the_scripts_the_workflows_name_exist_and_run():
    for name in ("gate.sh", "drift.sh", "release.sh"):
        assert os.access(EXAMPLES / name, os.X_OK), name
        assert subprocess.run(["bash", "-n", str(EXAMPLES / name)]).returncode == 0
    assert subprocess.run(["bash", "-n", str(EXAMPLES / "lib.sh")]).returncode == 0


# -- gate.sh: every exit code to the job's result -----------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """One finished run per verdict, written by the suite's writers."""
    from evals.report import write_reports

    root = tmp_path_factory.mktemp("runs")
    planted = {"PASS": PlantedTask("t", 200, 1, 1, verdict="PASS"),
               "REGRESSION": PlantedTask("t", 200, 30, 2, verdict="REGRESSION"),
               "INCONCLUSIVE": PlantedTask("t", 40, 2, 1, verdict="INCONCLUSIVE")}
    out = {}
    for verdict, task in planted.items():
        run_id = f"cfg-{verdict.lower()}"
        out[verdict] = write_synthetic_run(root / run_id, run_id=run_id,
                                           created="2026-11-30T10:00:00+00:00", tasks=[task],
                                           rng=np.random.default_rng(1), text=False,
                                           extra={"reason": f"planted {verdict}"})
        write_reports(out[verdict])
    return out


def _gate(tmp_path: Path, command: str, **env) -> tuple[subprocess.CompletedProcess, dict]:
    """gate.sh with a command that stands in for `nox -s ab` (writes a run, exits)."""
    environment = runner_environment(tmp_path / "runner", "1", nox_shim(tmp_path / "bin"))
    environment.pop("EVALS_INCONCLUSIVE_EXIT", None)
    environment.update(EVALS_REPORTS=str(tmp_path / "reports"), **env)
    result = subprocess.run([str(EXAMPLES / "gate.sh"), "bash", "-c", command], cwd=REPO,
                            env=environment, capture_output=True, text=True, timeout=300)
    return result, step_outputs(environment)


def _writes(run: Path, code: int) -> str:
    return f'mkdir -p "$EVALS_REPORTS" && cp -r "{run}" "$EVALS_REPORTS/" && exit {code}'


@pytest.mark.parametrize("verdict, code", [("PASS", 0), ("REGRESSION", 1), ("INCONCLUSIVE", 3)])
def test_a_finished_run_ends_the_job_with_its_exit_code(tmp_path, runs, verdict, code):
    result, outputs = _gate(tmp_path, _writes(runs[verdict], code))
    assert result.returncode == code, result.stdout + result.stderr
    run_dir = tmp_path / "reports" / runs[verdict].name
    assert f"{verdict} exit={code} {run_dir.name}: planted {verdict}\n" in result.stdout
    assert f"gate: {verdict} (exit {code})" in result.stdout
    assert outputs == {"verdict": verdict, "exit_code": str(code), "run_dir": str(run_dir)}


def test_inconclusive_needs_review_and_exits_as_configured(tmp_path, runs):
    result, outputs = _gate(tmp_path, _writes(runs["INCONCLUSIVE"], 3), EVALS_INCONCLUSIVE_EXIT="0")
    assert result.returncode == 0
    assert "gate: INCONCLUSIVE needs review" in result.stdout
    assert outputs["verdict"] == "INCONCLUSIVE" and outputs["exit_code"] == "3"


def test_a_wrong_inconclusive_exit_setting_is_bad_input(tmp_path, runs):
    result, _ = _gate(tmp_path, _writes(runs["INCONCLUSIVE"], 3), EVALS_INCONCLUSIVE_EXIT="ok")
    assert result.returncode == 2 and "must be an exit code (0-255), got 'ok'" in result.stderr


@pytest.mark.parametrize("code, verdict", [(2, "BAD_INPUT"), (4, "RUN_FAILED")])
def test_bad_input_and_failed_runs_fail_the_job_with_their_code(tmp_path, code, verdict):
    result, outputs = _gate(tmp_path, f"echo 'error: configs/x.yaml: ...' >&2; exit {code}")
    assert result.returncode == code
    assert outputs == {"verdict": verdict, "exit_code": str(code), "run_dir": ""}


def test_nox_failing_before_the_run_is_not_read_as_a_regression(tmp_path):
    result, outputs = _gate(tmp_path, "echo 'nox > Session ab failed.' >&2; exit 1")
    assert result.returncode == 4
    assert "exited 1 but wrote no run" in result.stderr
    assert outputs["verdict"] == "RUN_FAILED"


def test_a_code_that_is_not_the_runs_verdict_is_a_failed_run(tmp_path, runs):
    result, outputs = _gate(tmp_path, _writes(runs["REGRESSION"], 0))
    assert result.returncode == 4
    assert "exited 0 but its run says exit 1" in result.stderr
    assert outputs["verdict"] == "RUN_FAILED"


def test_runs_from_before_the_command_are_not_taken_for_its_run(tmp_path, runs):
    (tmp_path / "reports").mkdir()
    shutil.copytree(runs["PASS"], tmp_path / "reports" / "old-run")
    old = (tmp_path / "reports" / "old-run" / "summary.json")
    os.utime(old, (old.stat().st_atime - 60, old.stat().st_mtime - 60))
    result, outputs = _gate(tmp_path, "exit 4")
    assert result.returncode == 4 and outputs["run_dir"] == ""
    result, outputs = _gate(tmp_path, _writes(runs["REGRESSION"], 1))
    assert result.returncode == 1 and outputs["run_dir"].endswith("cfg-regression")


def test_two_runs_from_one_command_are_refused(tmp_path, runs):
    command = _writes(runs["PASS"], 0).replace(" && exit 0", f' && cp -r "{runs["REGRESSION"]}" '
                                                            '"$EVALS_REPORTS/" && exit 0')
    result, _ = _gate(tmp_path, command)
    assert result.returncode == 4 and "wrote 2 runs" in result.stderr


def test_gate_without_a_command_is_a_usage_error():
    result = subprocess.run([str(EXAMPLES / "gate.sh")], capture_output=True, text=True)
    assert result.returncode == 2 and "usage:" in result.stderr


# -- drift.sh: bad settings stop it before anything runs ------------------------------------

def _drift(tmp_path: Path, **env) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nox").write_text("#!/bin/sh\necho 'nox must not run' >&2\nexit 99\n")
    (bin_dir / "nox").chmod(0o755)
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for name in ("EVALS_CONFIG", "EVALS_DEPLOYMENT", "EVALS_STATE"):
        environment.pop(name, None)
    environment.update(env)
    return subprocess.run([str(EXAMPLES / "drift.sh")], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=60)


def test_drift_needs_its_three_settings(tmp_path):
    result = _drift(tmp_path, EVALS_CONFIG="c.yaml", EVALS_STATE=str(tmp_path / "s"))
    assert result.returncode == 2 and "set EVALS_DEPLOYMENT" in result.stderr
    assert "nox must not run" not in result.stderr


def test_drift_state_must_be_an_absolute_path(tmp_path):
    result = _drift(tmp_path, EVALS_CONFIG="c.yaml", EVALS_DEPLOYMENT="d", EVALS_STATE="state")
    assert result.returncode == 2 and "must be an absolute path" in result.stderr


def test_drift_state_restored_at_another_path_is_refused(tmp_path):
    state = tmp_path / "moved"
    state.mkdir()
    (state / "location").write_text(str(tmp_path / "original") + "\n")
    result = _drift(tmp_path, EVALS_CONFIG="c.yaml", EVALS_DEPLOYMENT="d", EVALS_STATE=str(state))
    assert result.returncode == 2
    assert f"saved at {tmp_path / 'original'} and restored at {state}" in result.stderr
    assert "nox must not run" not in result.stderr


# -- drift.sh across weeks, `compare` standing in for the engine runs ----------------------

FIXTURE = REPO / "tests" / "fixtures" / "lm_eval_run"


def _stand_in_nox(directory: Path, deployment: str) -> Path:
    """`nox -s ab` and `nox -s drift` become a `compare` of the recorded lm-eval fixture,
    recorded under the deployment; every other session is the real command. The state
    handling of drift.sh is what this checks, not the engines (tests/engine does that)."""
    directory.mkdir(parents=True, exist_ok=True)
    compare = (f'"{sys.executable}" -m evals compare "{FIXTURE}" "{FIXTURE}" '
               f'--deployment {deployment}')
    (directory / "nox").write_text(f"""#!/usr/bin/env bash
session=$2; shift 3; config=$1; shift
case $session in
  ab) exec {compare} --name {deployment} "$@" ;;
  drift) exec {compare} --reports "$2" --name "$4" ;;
  *) cd "{REPO}" && exec "{sys.executable}" -m evals "$session" "$config" "$@" ;;
esac
""")
    (directory / "nox").chmod(0o755)
    return directory


def test_drift_script_keeps_its_state_across_weeks_through_the_cache(tmp_path):
    workflow = load_yaml(WEEKLY_DRIFT)
    workspace = tmp_path / "workspace"
    state = state_path(workflow, workspace, "ci-drift")
    cache = ActionsCache(state, workspace, tmp_path / "cache")
    shim = _stand_in_nox(tmp_path / "bin", "ci-drift")
    values = {"EVALS_CONFIG": "configs/cpu/aa.yaml", "EVALS_DEPLOYMENT": "ci-drift",
              "EVALS_STATE": str(state)}
    ids = []
    for week in range(3):
        result, env = drift_week(workflow, cache, tmp_path / f"runner-{week}", f"20{week}", shim,
                                 values)
        log = result.stdout + result.stderr
        outputs = step_outputs(env)
        # the fixture compared with itself cannot show non-inferiority: needs review, job passes
        assert result.returncode == 0 and outputs["verdict"] == "INCONCLUSIVE", log
        ids.append(Path(outputs["run_dir"]).name)
        assert ("no golden run in" in log) == (week == 0), log
        assert sorted(p.name for p in uploaded_paths(workflow, "drift", env, {})) == \
            ["history.html", "latest"]
        assert json.loads((state / "latest" / "summary.json").read_text())["run_id"] == ids[-1]
        cache.save()
        assert not state.exists()
    golden = (cache.saved / "golden-run").read_text().strip()
    assert golden == ids[0] and len(set(ids)) == 3
    assert ids[1].startswith("ci-drift-drift-") and "-201-" in ids[1]
    history = (cache.saved / "history.html").read_text(encoding="utf-8")
    assert all(run_id in history for run_id in ids)  # week 2 reads weeks 0 and 1 from the store
    listed = subprocess.run([sys.executable, "-m", "evals", "runs", "--store",
                             str(cache.saved / "store")], capture_output=True, text=True,
                            cwd=REPO)
    assert f"{golden}" in listed.stdout and "(golden)" in listed.stdout


# -- changed_configs.py --------------------------------------------------------------------

def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def _changed(repo: Path, base: str = "main") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / "changed_configs.py"), base], cwd=repo,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture()
def config_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    (repo / "configs" / "cpu").mkdir(parents=True)
    files = {"configs/cpu/base.yaml": "model: m\narms: {}\n",
             "configs/cpu/a.yaml": "extends: base.yaml  # shared\nname: cpu-a\n",
             "configs/cpu/b.yaml": "extends: 'a.yaml'\nname: cpu-b\n",
             "configs/gpu.yaml": "name: gpu\ntasks:\n  - {name: x}\n",
             "configs/other.yaml": "name: other\n",
             "README.md": "x\n"}
    for path, text in files.items():
        (repo / path).write_text(text)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "pr")
    return repo


def test_a_changed_config_is_listed(config_repo):
    (config_repo / "configs" / "gpu.yaml").write_text("name: gpu\nlimit: 10\n")
    (config_repo / "README.md").write_text("y\n")
    _git(config_repo, "commit", "-qam", "change")
    result = _changed(config_repo)
    assert result.returncode == 0 and json.loads(result.stdout) == ["configs/gpu.yaml"]


def test_a_changed_base_lists_every_config_built_on_it(config_repo):
    (config_repo / "configs" / "cpu" / "base.yaml").write_text("model: n\narms: {}\n")
    _git(config_repo, "commit", "-qam", "change base")
    # base.yaml names no run; a.yaml extends it, b.yaml extends a.yaml
    assert json.loads(_changed(config_repo).stdout) == ["configs/cpu/a.yaml", "configs/cpu/b.yaml"]


def test_added_configs_are_listed_and_deleted_ones_are_not(config_repo):
    (config_repo / "configs" / "new.yml").write_text("name: new\n")
    (config_repo / "configs" / "other.yaml").unlink()
    _git(config_repo, "add", "-A")
    _git(config_repo, "commit", "-qm", "add and delete")
    assert json.loads(_changed(config_repo).stdout) == ["configs/new.yml"]


def test_no_change_is_an_empty_list_and_a_bad_ref_exit_2(config_repo):
    assert json.loads(_changed(config_repo).stdout) == []
    result = _changed(config_repo, "no-such-branch")
    assert result.returncode == 2 and result.stdout == "" and "no-such-branch" in result.stderr


# -- release-decision.yml: its step on the embedded model's recorded H200 runs ------------

GPU_RUNS = REPO / "benchmarks" / "results" / "gpu-h200"


@pytest.fixture(scope="module")
def release_store(tmp_path_factory) -> Path:
    """A run store holding two recorded runs: MTP + prefix caching (PASS) and KV-cache FP8
    (tiny_addition REGRESSION)."""
    from evals.store import RunStore

    root = tmp_path_factory.mktemp("release")
    store = RunStore(root / "store")
    for name in ("gpu-mtp-prefix-0c0dac60", "gpu-kv-fp8-f5ecc54a"):
        shutil.copytree(GPU_RUNS / name, root / "runs" / name)
        store.record_run(root / "runs" / name)
    return root / "store"


def _release_step(tmp_path: Path, store: Path, policy: str, shim: Path | None = None):
    workflow = load_yaml(RELEASE_DECISION)
    step = github_step(workflow, "release", "release")
    assert step["run"] == RELEASE_COMMAND
    path = tmp_path / "policy.yaml"
    path.write_text(policy, encoding="utf-8")
    env = runner_environment(tmp_path / "runner", "1", shim or nox_shim(tmp_path / "bin"))
    env.update(step_environment(workflow, "release", step, {
        "EVALS_POLICY": str(path), "EVALS_STORE": str(store),
        "EVALS_REPORTS": str(tmp_path / "reports")}))
    return run_step(step, env, timeout=300), step_outputs(env), env


@pytest.mark.parametrize("policy, code, verdict", [
    ("name: r\nevidence: {config_hash: 0c0dac60}\ntiers: {critical: [tiny_reviews_gen, "
     "tiny_addition]}\n", 0, "GO"),
    ("name: r\nevidence: {config_hash: f5ecc54a}\ntiers: {critical: [tiny_reviews_gen, "
     "tiny_addition]}\n", 1, "NO-GO"),
    ("name: r\nevidence: {config_hash: 0c0dac60}\ntiers: {critical: [tiny_reviews_multiturn]}\n",
     1, "NO-GO"),
    ("name: r\ntiers: {critical: [tiny_reviews_gen], advisory: [tiny_reviews_gen]}\n", 2,
     "BAD_INPUT"),
])
def test_the_release_step_ends_the_job_with_the_release_verdict(tmp_path, release_store, policy,
                                                                code, verdict):
    result, outputs, env = _release_step(tmp_path, release_store, policy)
    assert result.returncode == code, result.stderr
    assert outputs["verdict"] == verdict and outputs["exit_code"] == str(code)
    assert result.stdout.splitlines()[-1] == f"release: {verdict} (exit {code})"
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    if code == 2:
        assert outputs["release_dir"] == "" and "bad input (exit code 2)" in summary
        return
    assert outputs["release_dir"] == str(tmp_path / "reports" / "release-r")
    assert summary.startswith(f"## vllm-regression-evals: release {verdict} (exit code {code})")
    level = "notice" if code == 0 else "error"
    assert f"::{level} title=vllm-regression-evals%3A release {verdict} (exit {code})::" \
        in result.stdout
    record = json.loads(Path(outputs["release_dir"], "release.json").read_text())
    assert (record["verdict"], record["exit_code"]) == (verdict, code)


def test_nox_failing_before_the_release_is_not_read_as_no_go(tmp_path, release_store):
    shim = tmp_path / "failing"
    shim.mkdir()
    (shim / "nox").write_text("#!/usr/bin/env bash\nexit 1\n", encoding="utf-8")
    (shim / "nox").chmod(0o755)
    result, outputs, _ = _release_step(tmp_path, release_store, "name: r\ntiers: {critical: "
                                       "[tiny_reviews_gen]}\n", shim=shim)
    assert result.returncode == 4 and outputs["verdict"] == "FAILED"
    assert "wrote no release.json" in result.stderr
