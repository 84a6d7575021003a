"""Study configs (evals.plan.study): more than two arms, factorial designs expanded into
every combination, and bad input named before any engine starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evals.cli import main
from evals.errors import UserError
from evals.plan.arm_spec import ArmSpec
from evals.plan.config import load_config
from evals.plan.study import Study, load_run_config
from evals.dispatch.arms import run_id_for
from evals.preflight.study_checks import check_study_arms_differ

REPO = Path(__file__).resolve().parents[2]
MTP = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}


def write(tmp_path: Path, data: dict, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def base(tmp_path: Path, **extra) -> dict:
    return {"name": "s", "model": str(tmp_path), "tasks": ["tiny_reviews_gen", "tiny_addition"],
            **extra}


FACTORIAL = {"prefix_caching": {"off": {"enable_prefix_caching": False},
                                "on": {"enable_prefix_caching": True}},
             "decoding": {"plain": {}, "mtp": MTP}}


def test_factorial_expands_into_every_combination_with_readable_names(tmp_path):
    study = load_run_config(write(tmp_path, base(
        tmp_path, arm_defaults={"engine": {"dtype": "bfloat16"}, "env": {"X": "1"}},
        factorial=FACTORIAL)))
    assert isinstance(study, Study)
    assert study.arms == ("baseline", "prefix_caching=on", "decoding=mtp",
                          "prefix_caching=on+decoding=mtp")
    assert study.baseline == "baseline" and study.candidates == study.arms[1:]
    both = study.comparisons["prefix_caching=on+decoding=mtp"]
    assert both.arm("baseline").engine == {"dtype": "bfloat16", "enable_prefix_caching": False}
    assert both.arm("candidate").engine == {"dtype": "bfloat16", "enable_prefix_caching": True,
                                            **MTP}
    assert both.arm("candidate").env == {"X": "1"}
    # intended_change: the engine arguments of the factors each comparison changes
    assert study.comparisons["prefix_caching=on"].intended_change == ["enable_prefix_caching"]
    assert study.comparisons["decoding=mtp"].intended_change == ["speculative_config"]
    assert sorted(both.intended_change) == ["enable_prefix_caching", "speculative_config"]
    assert study.levels["decoding=mtp"] == {"prefix_caching": "off", "decoding": "mtp"}
    (cell,) = study.cells()
    assert (cell.neither, cell.first_only, cell.second_only, cell.both) == study.arms
    assert [t.name for t in both.tasks] == ["tiny_reviews_gen", "tiny_addition"]


def test_a_2x3_design_has_one_cell_per_pair_of_non_reference_levels(tmp_path):
    factorial = {**FACTORIAL, "decoding": {"plain": {}, "mtp": MTP,
                                           "ngram": {"speculative_config": {"method": "ngram"}}}}
    study = load_run_config(write(tmp_path, base(tmp_path, factorial=factorial)))
    assert len(study.arms) == 6
    assert {(c.first_level, c.second_level, c.both) for c in study.cells()} == {
        ("on", "mtp", "prefix_caching=on+decoding=mtp"),
        ("on", "ngram", "prefix_caching=on+decoding=ngram")}


def test_explicit_arms_with_a_named_baseline(tmp_path):
    arms = {"plain": {"engine": {"enable_prefix_caching": False}},
            "pc": {"engine": {"enable_prefix_caching": True}},
            "mtp": {"engine": {"enable_prefix_caching": False, **MTP}}}
    study = load_run_config(write(tmp_path, base(tmp_path, baseline="plain", arms=arms)))
    assert study.arms == ("plain", "pc", "mtp") and study.cells() == []
    assert study.comparisons["mtp"].arm("baseline").engine == {"enable_prefix_caching": False}
    assert study.comparisons["pc"].intended_change is None  # as given: every difference


def test_two_arm_configs_are_unchanged_and_arm_defaults_keep_their_run_id(tmp_path):
    explicit = base(tmp_path, arms={"baseline": {"env": {"X": "1"}, "engine": {"a": 1}},
                                    "candidate": {"env": {"X": "1"}, "engine": {"a": 2}}})
    shared = base(tmp_path, arm_defaults={"env": {"X": "1"}},
                  arms={"baseline": {"engine": {"a": 1}}, "candidate": {"engine": {"a": 2}}})
    one = load_run_config(write(tmp_path, explicit, "one.yaml"))
    two = load_config(write(tmp_path, shared, "two.yaml"))
    assert not isinstance(one, Study)
    assert one.arms == two.arms and run_id_for(one) == run_id_for(two)


@pytest.mark.parametrize("extra, message", [
    ({"factorial": {"a": {"x": {"enable_prefix_caching": True}, "y": {}},
                    "b": {"u": {}, "v": {"enable_prefix_caching": False}}}},
     "factors `a` and `b` both set `enable_prefix_caching`"),
    ({"factorial": {"a": {"only": {}}}}, "`factorial.a` must map at least two level names"),
    ({"factorial": FACTORIAL, "arms": {"baseline": {}}}, "`factorial` and `arms` cannot both"),
    ({"factorial": FACTORIAL, "sequential": {"chunk": 50}}, "`sequential` is not available"),
    ({"factorial": FACTORIAL, "gate": {"pooled": True}}, "`gate.pooled` is not available"),
    ({"baseline": "nope", "arms": {"a": {}, "b": {}, "c": {}}}, "`baseline: nope` names no arm"),
    ({"arms": {"baseline": {}, "candidate": {}, "x": {}}}, "`candidate` cannot name an arm"),
    ({"arms": {"baseline": {}, "a b": {}, "x": {}}}, "arm name 'a b'"),
    ({"arms": {"baseline": {}, "fast": {"engine": {}, "cache_stres": True}, "x": {}}},
     "unknown key `arms.fast.cache_stres`"),
])
def test_bad_study_input_is_one_message_naming_the_key(tmp_path, extra, message):
    path = write(tmp_path, base(tmp_path, **extra))
    with pytest.raises(UserError) as error:
        load_run_config(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_bad_study_exits_2_without_traceback(tmp_path, capsys):
    path = write(tmp_path, base(tmp_path, factorial={
        "a": {"x": {"enable_prefix_caching": True}, "y": {}},
        "b": {"u": {}, "v": {"enable_prefix_caching": False}}}))
    assert main(["ab", str(path)]) == 2
    err = capsys.readouterr().err
    assert "both set `enable_prefix_caching`" in err and "Traceback" not in err


@pytest.mark.parametrize("extra, args, message", [
    ({"factorial": FACTORIAL}, ["--executor", "ray"],
     "--arms-per-gpu is for arms run on this machine; with `--executor ray`"),
    ({"arms": {"baseline": {"engine": {"a": 1}}, "candidate": {"engine": {"a": 2}}}}, [],
     "--arms-per-gpu is for studies (more than two arms or `factorial:`); a two-arm config"),
])
def test_arms_per_gpu_is_for_studies_on_this_machine(tmp_path, capsys, extra, args, message):
    path = write(tmp_path, base(tmp_path, **extra))
    assert main(["ab", str(path), "--arms-per-gpu", "2", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "two"])
def test_arms_per_gpu_must_be_a_whole_number_of_one_or_more(tmp_path, capsys, value):
    path = write(tmp_path, base(tmp_path, factorial=FACTORIAL))
    with pytest.raises(SystemExit) as caught:
        main(["ab", str(path), "--arms-per-gpu", value])
    assert caught.value.code == 2
    assert "--arms-per-gpu: expected a whole number of 1 or more" in capsys.readouterr().err


def test_two_arm_commands_refuse_a_study(tmp_path):
    path = write(tmp_path, base(tmp_path, factorial=FACTORIAL))
    with pytest.raises(UserError, match="this command takes a two-arm config"):
        load_config(path)


def test_identical_arms_are_named(tmp_path):
    study = load_run_config(write(tmp_path, base(tmp_path, arms={
        "baseline": {"engine": {"a": 1}}, "b": {"engine": {"a": 2}}, "c": {"engine": {"a": 2}}})))

    def spec(arm: str) -> ArmSpec:
        config = study.comparisons.get(arm) or study.settings
        role = "candidate" if arm in study.comparisons else "baseline"
        return ArmSpec(arm=arm, model=str(tmp_path), engine=dict(config.arm(role).engine),
                       env={}, tasks=(), limit=None, num_fewshot=None, seed=1,
                       include_paths=(), output_dir="", versions={})

    with pytest.raises(UserError, match="arms `b` and `c` are identical"):
        check_study_arms_differ(study, {a: spec(a) for a in study.arms})


def test_shipped_cpu_study_extends_the_cpu_base_and_matches_mtp_prefix_arms():
    study = load_run_config(REPO / "configs" / "cpu" / "study_mtp_prefix.yaml")
    two_arm = load_config(REPO / "configs" / "cpu" / "mtp_prefix.yaml")
    both = study.comparisons["prefix_caching=on+decoding=mtp"]
    # the same baseline and combined arm as mtp_prefix.yaml: the run store serves them
    assert both.arms == two_arm.arms and both.tasks == two_arm.tasks
    assert len(study.arms) == 4 and len(study.cells()) == 1
