"""Every stored JSON record: written at the current version with schema_version first,
read back unchanged, older versions migrated, newer ones and non-records refused with the
file named (evals.schemas)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.plan.arm_spec import ArmSpec
from evals.errors import UserError
from evals.schemas import (ARM_SPEC, FAULT_TALLY, KEY, KINDS, PAIRED_ITEMS, SUMMARY,
                           RecordKind)
from evals.record.run_record import read_paired_items, read_summary
from evals.runner.layout import ArmLayout

SAMPLE = {"task": "tiny_addition", "key": "0123456789abcdef0123", "wall_seconds": 1.5,
          "nested": {"a": [1, 2, None]}, "text": "é \u2028 <b>"}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_current_version_round_trips_with_the_version_first(kind: RecordKind, tmp_path):
    path = tmp_path / "record.json"
    kind.write(path, SAMPLE)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert list(raw)[0] == KEY and raw[KEY] == kind.version
    assert kind.read(path) == {KEY: kind.version, **SAMPLE}
    # reading is idempotent: a read record written again reads the same
    kind.write(path, kind.read(path))
    assert kind.read(path) == {KEY: kind.version, **SAMPLE}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_a_newer_version_is_refused_naming_the_file(kind: RecordKind, tmp_path):
    path = tmp_path / "future.json"
    path.write_text(json.dumps({KEY: kind.version + 1, **SAMPLE}), encoding="utf-8")
    with pytest.raises(UserError, match=f"{path}: schema_version {kind.version + 1} is newer "
                                        f"than this suite reads \\({kind.version}\\) for a "
                                        f"{kind.name}"):
        kind.read(path)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "must be a JSON object, got list"),
    ('{"schema_version": "1"}', "is not a version number"),
    ('{"schema_version": true}', "is not a version number"),
    ('{"schema_version": -1}', "is not a version number"),
    ('{"schema_version": 1', "unreadable"),
])
def test_what_is_not_a_record_is_refused(kind: RecordKind, content, message, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        kind.read(path)


@pytest.mark.parametrize("kind", [k for k in KINDS if 0 in k.migrations], ids=lambda k: k.name)
def test_a_record_from_before_versions_is_migrated(kind: RecordKind, tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    migrated = kind.read(path)
    assert migrated[KEY] == kind.version
    if kind is FAULT_TALLY:
        assert migrated["fired"] == SAMPLE
    elif kind is not ARM_SPEC:
        assert {k: v for k, v in migrated.items() if k != KEY} == SAMPLE


@pytest.mark.parametrize("kind", [k for k in KINDS if 0 not in k.migrations],
                         ids=lambda k: k.name)
def test_kinds_that_always_had_a_version_refuse_a_record_without_one(kind, tmp_path):
    path = tmp_path / "unversioned.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    with pytest.raises(UserError, match=f"no schema_version; not a {kind.name}"):
        kind.read(path)


def _spec(**changes) -> ArmSpec:
    fields = dict(arm="candidate", model="/m", engine={"dtype": "bfloat16"}, env={},
                  tasks=("t",), limit=10, num_fewshot=0, seed=1, include_paths=("/tasks",),
                  output_dir="/out", versions={"vllm": "0.32.0"})
    return ArmSpec(**{**fields, **changes})


def test_arm_spec_v1_with_a_sequential_reference_migrates_to_asking_the_parent(tmp_path):
    current = json.loads(_spec().to_json())
    assert list(current)[0] == KEY and current[KEY] == ARM_SPEC.version == 4
    v1 = {**current, KEY: 1, "sequential": {
        "chunk": 50, "alpha": 0.0125, "margin": 0.03, "metrics": {"t": ["acc", "none"]},
        "reference": "/run/arms/baseline/lm_eval"}}
    (tmp_path / "spec.json").write_text(json.dumps(v1), encoding="utf-8")
    spec = ArmSpec.read(tmp_path / "spec.json")
    assert spec.sequential == {"chunk": 50, "look": True,
                               "stop_rule": [0.0125, 0.03, {"t": ["acc", "none"]}]}
    assert spec.schema_version == ARM_SPEC.version
    baseline_v1 = {**v1, "sequential": {**v1["sequential"], "reference": None}}
    assert ArmSpec.from_dict(baseline_v1).sequential == {"chunk": 50}
    # the current version reads back as the same spec, with the same content keys
    again = ArmSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec and again.key_for("t") == spec.key_for("t")


def test_arm_spec_v2_migrates_with_an_unknown_machine_and_keeps_its_content_keys(tmp_path):
    """v3 added the machine's kernel key (`platform`): a v2 spec's machine is unknown ({}),
    and a spec without one keys its tasks as v2 did; one with a machine keys them apart."""
    current = json.loads(_spec().to_json())
    assert current["platform"] == ArmSpec.__dataclass_fields__["platform"].default_factory()
    v2 = {k: v for k, v in current.items() if k != "platform"} | {KEY: 2}
    (tmp_path / "spec.json").write_text(json.dumps(v2), encoding="utf-8")
    old = ArmSpec.read(tmp_path / "spec.json")
    assert old.platform == {} and old.schema_version == ARM_SPEC.version
    avx2 = {"machine": "x86_64", "isa": ["avx2"]}
    avx512 = {"machine": "x86_64", "isa": ["avx2", "avx512f", "avx512vl", "avx512bw", "avx512dq"]}
    keys = {_spec(platform=p).key_for("t") for p in (avx2, avx512)}
    assert len(keys) == 2 and old.key_for("t") not in keys
    # an endpoint arm runs on another machine: this one's kernels do not key it
    assert _spec(platform=avx2, mode="endpoint").key_for("t") == \
        _spec(platform=avx512, mode="endpoint").key_for("t")


def test_arm_layout_reads_old_task_markers_and_both_fault_tally_forms(tmp_path):
    layout = ArmLayout(tmp_path / "arm")
    layout.tasks_dir.mkdir(parents=True)
    # a marker from before markers carried a version: still a finished task
    layout.task_marker("t").write_text(json.dumps({"task": "t", "key": "k1"}), encoding="utf-8")
    assert layout.task_done("t", "k1") and not layout.task_done("t", "k2")
    assert layout.task_record("t")[KEY] == 1
    # a marker from a newer suite is not trusted as finished: the task runs again
    layout.task_marker("t").write_text(json.dumps({KEY: 99, "task": "t", "key": "k1"}))
    assert not layout.task_done("t", "k1")
    layout.fault_tally_dir.mkdir()
    (layout.fault_tally_dir / "1.json").write_text(json.dumps({"spec_unverified": 3}))
    # the plugin's fixed-width record: version 1, padded with spaces
    (layout.fault_tally_dir / "2.json").write_text(
        json.dumps({KEY: 1, "fired": {"spec_unverified": 4, "kv_scale": 1}}).ljust(512))
    (layout.fault_tally_dir / "3.json").write_text('{"schema_ver')  # killed mid-write
    assert layout.fault_tally() == {"spec_unverified": 7, "kv_scale": 1}


def test_summary_and_paired_items_readers_check_the_version(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({KEY: SUMMARY.version + 1}))
    with pytest.raises(UserError, match="newer than this suite reads"):
        read_summary(run)
    (run / "summary.json").write_text(json.dumps({"kind": "ab"}))
    with pytest.raises(UserError, match="no schema_version; not a summary"):
        read_summary(run)
    (run / "paired_items.jsonl").write_text(json.dumps({KEY: PAIRED_ITEMS.version + 1}) + "\n")
    with pytest.raises(UserError, match=r"paired_items.jsonl, line 1: .*newer"):
        read_paired_items(run)
    (run / "paired_items.jsonl").write_text("{}\n" + json.dumps({"task": "t"}) + "\n")
    assert read_paired_items(run) == [{"task": "t"}]  # a header from before versions


def test_every_stored_json_record_is_written_by_its_record_kind():
    """No stored record is written as a bare dict: outside the atomic-write helper and the
    record kinds, the only JSON writer is the worker's questions' answers, which are not
    stored (evals.runner.asks deletes each once read)."""
    package = Path(__file__).resolve().parents[2] / "evals"
    allowed = {Path("atomic_files.py"), Path("schemas.py"), Path("runner/asks.py")}
    offenders = [f"{path.relative_to(package)}:{number}"
                 for path in package.rglob("*.py") if path.relative_to(package) not in allowed
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if "write_json_atomic(" in line and not line.lstrip().startswith(
                     ("from", "import", "def"))]
    assert offenders == []


def test_recording_logprobs_keys_offline_arms_apart_and_reads_old_specs_without_it():
    """A stored arm without log-probabilities cannot serve a run that needs them; an arm
    that records none keys its tasks as before; a spec written before `logprobs` reads
    back with none."""
    assert _spec(logprobs=5).key_for("t") != _spec().key_for("t")
    assert _spec(logprobs=5).key_for("t") != _spec(logprobs=3).key_for("t")
    assert _spec(logprobs=0).key_for("t") == _spec().key_for("t")
    assert _spec(logprobs=5, mode="server").key_for("t") == _spec(mode="server").key_for("t")
    old = {k: v for k, v in json.loads(_spec().to_json()).items() if k != "logprobs"}
    assert ArmSpec.from_dict(old).logprobs == 0
