"""The typed parts of one task's record (summary.json `tasks[].labels`, `.lengths`,
`.sequential`, `.repeats`, `.answer_distribution`): the analysis results of
evals.analyse, flattened by evals.record.run_record and read back as these models.

Every part dumps the keys it was given (evals.record.stored.StoredRecord), so a summary
reads and writes back as it was."""

from __future__ import annotations

from pydantic import Field

from evals.record.stored import PART_CONFIG, StoredRecord


class LabelsRecord(StoredRecord):
    """Per-label confusion of a multiple-choice task (evals.analyse.task_analysis
    .LabelAnalysis)."""

    model_config = PART_CONFIG

    categories: list[str] = Field(description="The answer labels, `(other)` last.")
    confusion_baseline: list[list[int]] = Field(description="Baseline counts: row the "
                                                "target label, column the predicted one.")
    confusion_candidate: list[list[int]] = Field(description="The candidate's counts, "
                                                 "laid out as confusion_baseline.")
    per_class_baseline: list[float | None] = Field(description="Baseline accuracy per "
                                                   "target label (None: no such target).")
    per_class_candidate: list[float | None] = Field(description="The candidate's accuracy "
                                                    "per target label.")
    predicted_share_baseline: list[float] = Field(description="Share of baseline "
                                                  "predictions per label.")
    predicted_share_candidate: list[float] = Field(description="Share of candidate "
                                                   "predictions per label.")
    homogeneity_statistic: float | None = Field(description="Stuart-Maxwell statistic of "
                                                "the predicted labels' marginal shift.")
    homogeneity_pvalue: float | None = Field(description="Its p-value.")
    homogeneity_df: int | None = Field(description="Its degrees of freedom.")
    homogeneity_note: str | None = Field(description="Why the test could not run, if so.")


class LengthsRecord(StoredRecord):
    """Response lengths of a generative task (evals.analyse.task_analysis.LengthAnalysis)."""

    model_config = PART_CONFIG

    mean_chars_baseline: float | None = Field(description="Mean response length of the "
                                              "baseline, in characters.")
    mean_chars_candidate: float | None = Field(description="Mean response length of the "
                                               "candidate, in characters.")
    pvalue: float | None = Field(description="Paired test of the length change.")
    note: str | None = Field(description="Why the test could not run, if so.")
    empty_share_baseline: float | None = Field(description="Share of empty baseline "
                                               "responses.")
    empty_share_candidate: float | None = Field(description="Share of empty candidate "
                                                "responses.")


class SequentialRecord(StoredRecord):
    """What the interim looks of a sequential task decided (evals.analyse.early_stop
    .SequentialSummary)."""

    model_config = PART_CONFIG

    decision: str = Field(description="regression, non_inferior, or continue (no boundary "
                                      "crossed; the full set ran).")
    items_used: int = Field(description="Items compared when the looks stopped.")
    n_items: int = Field(description="Items in the task's full set.")
    chunk: int = Field(description="Items per look.")
    looks: int = Field(description="Looks taken.")
    alpha: float = Field(description="The error budget of the looks.")
    threshold: float = Field(description="The e-value boundary, 1 / alpha.")
    log_evalue_regression: float = Field(description="Log e-value of 'the candidate is "
                                                     "worse'.")
    log_evalue_noninferiority: float = Field(description="Log e-value of 'not worse by more "
                                                         "than the margin'.")


class RepeatsRecord(StoredRecord):
    """A sampled task's repeats behind its rate test (evals.analyse.rate_results
    .RepeatsSummary)."""

    model_config = PART_CONFIG

    repeats: int = Field(description="k, the sampled repeats per item.")
    method: str = Field(description="The paired rate test's method.")
    missing: int = Field(description="Repeats missing from either arm.")
    items_dropped: int = Field(description="Items whose pass rate fell.")
    items_gained: int = Field(description="Items whose pass rate rose.")


class AnswerCountsRecord(StoredRecord):
    """One item whose sampled answers moved: both arms' answer counts."""

    model_config = PART_CONFIG

    doc_id: int | str = Field(description="The item's lm-eval doc_id.")
    statistic: float = Field(description="The item's share of the check's statistic.")
    baseline: dict[str, int] = Field(description="Each answer's count over the baseline's "
                                                 "repeats.")
    candidate: dict[str, int] = Field(description="Each answer's count over the "
                                                  "candidate's repeats.")


class AnswerDistributionRecord(StoredRecord):
    """A sampled task's answer-distribution check (evals.analyse.rate_results
    .AnswerDistribution)."""

    model_config = PART_CONFIG

    statistic: float = Field(description="The check's statistic over every item.")
    pvalue: float = Field(description="Its permutation p-value.")
    null_mean: float = Field(description="The statistic's mean under the permutations.")
    n_items: int = Field(description="Items compared.")
    repeats: int = Field(description="k, the sampled repeats per item.")
    informative_items: int = Field(description="Items whose answers vary at all.")
    changed: bool = Field(description="p <= alpha, before any correction over tasks.")
    top_items: list[AnswerCountsRecord] = Field(description="Up to five items that moved "
                                                            "the most.")
