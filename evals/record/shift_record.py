"""The typed `shift` part of a run's record: each task's distribution-shift analysis
(evals.analyse.shift.ShiftAnalysis, flattened by evals.record.run_record.shift_record) and
the gate it ran under. A field an older writer did not write reads as None."""

from __future__ import annotations

from pydantic import Field

from evals.record.stored import PART_CONFIG, StoredRecord


class DivergenceRecord(StoredRecord):
    """The spread of per-item KL, top-1 agreement and delta-p over a task
    (evals.stats.divergence.DivergenceSummary)."""

    model_config = PART_CONFIG

    n_items: int | None = Field(None, description="Items compared.")
    n_positions: int | None = Field(None, description="Token positions (or choices) compared.")
    mean_kl: float | None = Field(None, description="Mean over items of each item's mean "
                                                    "per-position KL, nats.")
    p95_kl: float | None = Field(None, description="95th percentile of the items' mean KL.")
    max_kl: float | None = Field(None, description="Largest item mean KL.")
    top1_agreement: float | None = Field(None, description="Share of positions where both "
                                                           "arms' top token agree.")
    diverged: int | None = Field(None, description="Items whose generations (choices) differ "
                                                   "somewhere.")
    median_first_divergence: float | None = Field(None, description="Median position of an "
                                                  "item's first differing token.")
    mean_delta_p: float | None = Field(None, description="Mean change of the baseline top "
                                                         "token's probability.")
    delta_p_skew: float | None = Field(None, description="Skewness of delta-p (None with "
                                                         "fewer than three values).")


class ShiftTestRecord(StoredRecord):
    """The one-sided paired test of the shift against the A/A rerun
    (evals.stats.divergence.ShiftTestResult)."""

    model_config = PART_CONFIG

    statistic: float | None = Field(None, description="The test statistic.")
    pvalue: float | None = Field(None, description="Its one-sided p-value.")
    n: int | None = Field(None, description="Paired items.")
    n_informative: int | None = Field(None, description="Items whose difference is not 0.")
    mean_difference: float | None = Field(None, description="Mean of KL(b||c) - KL(b||rerun), "
                                                            "nats.")
    confidence_interval: list[float | None] | None = Field(None, description="Its interval, "
                                                           "(low, high).")
    confidence_level: float | None = Field(None, description="The interval's level.")
    margin: float | None = Field(None, description="gate.shift_margin, nats (absent in "
                                                   "records of the older Wilcoxon test).")
    note: str | None = Field(None, description="What limits the test, if anything.")


class FlipProneRecord(StoredRecord):
    """An item of low baseline margin (evals.analyse.shift.FlipProneItem)."""

    model_config = PART_CONFIG

    doc_id: int | str = Field(description="The item's lm-eval doc_id.")
    margin: float = Field(description="The baseline's top-1 minus top-2 log-probability, "
                                      "nats.")
    near_tie: bool = Field(description="A margin within bf16 rounding.")
    flip: str = Field(description="correct->wrong, wrong->correct, changed, or empty (no "
                                  "flip).")
    mean_kl: float | None = Field(None, description="The item's mean per-position KL.")
    first_divergence: int | None = Field(None, description="Its first differing position.")


class TaskShiftRecord(StoredRecord):
    """One task's distribution-shift analysis (evals.analyse.shift.ShiftAnalysis)."""

    model_config = PART_CONFIG

    task: str = Field(description="The task.")
    kind: str | None = Field(None, description="generation (per-token top-k) or choice "
                                               "(per-choice log-likelihoods).")
    top_k: int | None = Field(None, description="Top-k log-probabilities per token.")
    summary: DivergenceRecord | None = Field(None, description="The divergence summary.")
    test: ShiftTestRecord | None = Field(None, description="The test against the A/A rerun, "
                                                           "if run.")
    test_note: str | None = Field(None, description="Why there is no test, or empty.")
    strata: list[tuple[str, int, int]] | None = Field(None, description="(baseline-margin "
                                                      "stratum, items, items whose score "
                                                      "changed).")
    flips: int | None = Field(None, description="Items whose score changed.")
    near_tie_flips: int | None = Field(None, description="Of them, at a near tie.")
    flip_prone: list[FlipProneRecord] | None = Field(None, description="The items of lowest "
                                                     "baseline margin, lowest first.")
    missing: int | None = Field(None, description="Paired items without the data in one "
                                                  "arm.")
    pvalue_adjusted: float | None = Field(None, description="The test's p-value, Holm over "
                                                            "the run's tested tasks.")


class ShiftRecord(StoredRecord):
    """The run's distribution-shift analyses (`logprobs: k`) and their gate."""

    model_config = PART_CONFIG

    gate: str | None = Field(None, description="gate.logprob: warn, fail or off.")
    alpha: float | None = Field(None, description="The level the tests are judged at.")
    tasks: list[TaskShiftRecord] = Field([], description="Each analysed task.")
    notes: dict[str, str] = Field({}, description="Each task without an analysis and why.")
