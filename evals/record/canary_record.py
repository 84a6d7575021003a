"""What the canary records of each fault run (canary.json `faults`): the verdict, whether
it is the expected one, the flips, how often the fault fired, and the smallest fault rate
the config's tasks and item counts would catch with 80% power.

That rate is estimated from the observed flips: the per-item flip probabilities each way
are taken as linear in the rate between the clean run (rate 0) and the faulty run, and
the exact one-sided McNemar test's power at the gate's level (Bonferroni over gated tasks,
a conservative stand-in for Holm) is searched over the rate."""

from __future__ import annotations

from pathlib import Path
from pydantic import BaseModel, ConfigDict, Field

from evals import stats
from evals.errors import ExitCode
from evals.plan.fault_catalog import FAULTS
from evals.record.run_parts import ExerciseRecord
from evals.record.run_record import read_run_record
from evals.record.run_record_model import RunRecord, StoredRecord, TaskRecord
from evals.schemas import CANARY

TARGET_POWER = 0.8


_CONFIG = ConfigDict(extra="forbid", frozen=True)


class FaultOptions(StoredRecord):
    """A fault's options besides its name and rate (evals.plan.config.FaultConfig); it
    dumps the options it was given."""

    model_config = _CONFIG

    only_with_spec_decode: bool | None = Field(None, description="prefix_hit_overrun only: "
                                               "fire only with speculative decoding on.")


class FaultResult(BaseModel):
    """One fault run: the candidate with the fault injected, against the baseline."""

    model_config = _CONFIG

    fault: str = Field(description="The fault's name (evals.plan.fault_catalog).")
    rate: float = Field(description="The rate it was injected at.")
    harmful: bool = Field(description="Whether the fault changes answers (the gate must "
                                      "catch it) or is benign (it must not).")
    options: FaultOptions = Field(description="The fault's other options.")
    verdict: str = Field(description="The fault run's verdict.")
    exit_code: int = Field(description="The fault run's exit code.")
    caught: bool = Field(description="The gate said REGRESSION.")
    as_expected: bool = Field(description="Caught if harmful, not caught if benign, and it "
                                          "fired.")
    correct_to_wrong: int = Field(description="Gated items right in the baseline, wrong with "
                                              "the fault.")
    wrong_to_correct: int = Field(description="Gated items the other way.")
    items_used: int = Field(description="Gated items the run used.")
    items_planned: int = Field(description="Gated items it planned (a sequential run may stop "
                                           "early).")
    fired: int = Field(description="How often the fault fired in the candidate's engine.")
    min_detectable_rate: float | None = Field(description="Smallest rate caught with 80% "
                                              "power (None: not within (0, 1]).")
    run_id: str = Field(description="The fault run's id (its report is ../RUN_ID/).")
    models: str = Field(description="The real vLLM bug the fault models.")


class CleanRun(BaseModel):
    """The canary's clean A/B run."""

    model_config = _CONFIG

    run_id: str = Field(description="Its run id.")
    verdict: str = Field(description="Its verdict.")
    exit_code: int = Field(description="Its exit code.")
    wall_seconds: float = Field(description="Its wall time.")


class CanaryRecord(StoredRecord):
    """canary.json: the clean run, each fault run, and whether the canary passed."""

    model_config = _CONFIG

    schema_version: int = Field(CANARY.version, description="Layout version of this record.")
    config: str = Field(description="The config file.")
    name: str = Field(description="The config's name.")
    clean: CleanRun = Field(description="The clean A/B run.")
    faults: list[FaultResult] = Field(description="Each fault run.")
    exercise: ExerciseRecord | None = Field(None, description="The clean run's exercise "
                                            "record (evals.analyse.exercise).")
    runner: str | None = Field(None, description="The vLLM model runner the arms used.")
    wall_seconds: float = Field(description="The canary's wall time.")
    target_power: float = Field(description="The power the minimum detectable rates are for.")
    passed: bool = Field(description="Every harmful fault caught, no benign one.")


def read_canary_record(path: Path) -> CanaryRecord:
    """The one reader of canary.json (its version checked by evals.schemas.CANARY)."""
    return CanaryRecord.from_stored(CANARY.read(path), path)


def _flip_probs(task: TaskRecord) -> tuple[float, float]:
    n = max(int(task.n), 1)
    return task.correct_to_wrong / n, task.wrong_to_correct / n


def _planned(task: TaskRecord) -> int:
    looks = task.sequential
    return int(looks.n_items) if looks else int(task.n)


def min_detectable_rate(clean: list[TaskRecord], faulty: list[TaskRecord], rate: float,
                        alpha: float,
                        power: float = TARGET_POWER) -> float | None:
    """Smallest fault rate in (0, 1] whose expected flips give the exact one-sided McNemar
    gate `power` on at least one gated task, with flip probabilities linear in the rate
    between the clean run's tasks (rate 0) and the faulty run's (rate `rate`)."""
    gated = [t for t in clean if t.gated]
    level = alpha / max(len(gated), 1)
    faulty_tasks = {t.task: t for t in faulty}
    pairs = [(t, faulty_tasks[t.task]) for t in gated if t.task in faulty_tasks]

    def best_power(r: float) -> float:
        best = 0.0
        for c, f in pairs:
            b0, c0 = _flip_probs(c)
            bf, cf = _flip_probs(f)
            scale = r / rate
            pb = max(0.0, b0 + scale * (bf - b0))
            pc = max(0.0, c0 + scale * (cf - c0))
            if pb + pc > 0.999:  # the line leaves the probability simplex: stop at its edge
                pb, pc = 0.999 * pb / (pb + pc), 0.999 * pc / (pb + pc)
            discordance, drop = pb + pc, pb - pc
            if drop <= 0:
                continue
            best = max(best, stats.mcnemar_power(_planned(c), drop, discordance, level,
                                                 method="exact"))
        return best

    if best_power(1.0) < power:
        return None
    low, high = 0.0, 1.0
    for _ in range(30):  # bisection to ~1e-9; power grows with the rate
        mid = (low + high) / 2
        if best_power(mid) >= power:
            high = mid
        else:
            low = mid
    return high


def fault_result(fault: dict, code: ExitCode, run_dir: Path, clean: RunRecord,
                 alpha: float) -> FaultResult:
    """One fault run's outcome, read from its run record, against the clean run's."""
    summary = read_run_record(run_dir)
    info = FAULTS[fault["name"]]
    gated = [t for t in summary.tasks if t.gated]
    caught = summary.verdict == "REGRESSION"
    arm = (summary.faults or {}).get("candidate")
    fired = int(sum(arm.fired.values())) if arm else 0
    first = arm.requested[0] if arm and arm.requested else None
    rate = float(first.rate if first and first.rate is not None else info.default_rate) \
        if arm else float(fault.get("rate", info.default_rate))
    return FaultResult(
        fault=fault["name"], rate=rate, harmful=info.harmful,
        options={k: v for k, v in fault.items() if k not in ("name", "rate")},
        verdict=summary.verdict, exit_code=int(code), caught=caught,
        # a fault that never fired tested nothing: a failed canary, whatever the verdict
        as_expected=caught == info.harmful and fired > 0,
        correct_to_wrong=sum(t.correct_to_wrong for t in gated),
        wrong_to_correct=sum(t.wrong_to_correct for t in gated),
        items_used=sum(int(t.n) for t in gated), items_planned=sum(_planned(t) for t in gated),
        fired=fired,
        min_detectable_rate=min_detectable_rate(clean.tasks, summary.tasks, rate, alpha),
        run_id=run_dir.name, models=info.models)
