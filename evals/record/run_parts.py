"""The typed parts of a run's record (summary.json `platform`, `pooled`, `cache_stress`,
`faults`): what evals.hardware, evals.decide and evals.analyse found, read back as these
models by the report, the canary and the CI outputs.

Every part dumps the keys it was given (evals.record.stored.StoredRecord), so a summary
reads and writes back as it was; a field an older writer did not write reads as None."""

from __future__ import annotations

from pydantic import Field

from evals.record.stored import PART_CONFIG, StoredRecord


class PlatformRecord(StoredRecord):
    """A machine (evals.hardware.Platform.to_dict), with the suite's role on it."""

    model_config = PART_CONFIG

    machine: str | None = Field(None, description="The CPU architecture, e.g. x86_64.")
    cpu_model: str | None = Field(None, description="The CPU's model name.")
    cpu_vendor: str | None = Field(None, description="The CPU's vendor id.")
    logical_cpus: int | None = Field(None, description="Logical CPUs the machine has.")
    isa: list[str] | None = Field(None, description="The vector ISA flags vLLM's CPU "
                                                    "kernels care about.")
    gpus: list[str] | None = Field(None, description="The GPUs, one line each.")
    source: str | None = Field(None, description="Where the CPU facts were read.")
    vector_isa: str | None = Field(None, description="The widest vector ISA, in words.")
    vllm_cpu_kernels: str | None = Field(None, description="Which vLLM CPU kernel build "
                                                           "that ISA selects.")
    summary: str | None = Field(None, description="The machine in one line.")
    role: str | None = Field(None, description="Whether the suite ran the arms here or only "
                                               "analysed outputs made elsewhere.")


class PooledRecord(StoredRecord):
    """The exact stratified McNemar test over the gated binary tasks
    (evals.decide.verdict.PooledVerdict)."""

    model_config = PART_CONFIG

    tasks: list[str] = Field(description="The gated binary tasks pooled.")
    correct_to_wrong: int = Field(description="Items right in the baseline, wrong in the "
                                              "candidate, over those tasks.")
    wrong_to_correct: int = Field(description="Items the other way.")
    pvalue: float = Field(description="The test's one-sided p-value.")
    pvalue_adjusted: float = Field(description="Holm-adjusted with the per-task tests when "
                                               "it gates, else as is.")
    gates: bool = Field(description="Whether it gates the run (`gate.pooled: true`).")
    significant: bool = Field(description="Whether it rejects at the gate's level.")


class CacheStressRecord(StoredRecord):
    """One warm-versus-cold cache check of an arm's task
    (evals.analyse.cache_stress.WarmColdCheck)."""

    model_config = PART_CONFIG

    arm: str = Field(description="The arm whose passes are compared.")
    task: str = Field(description="The task.")
    n: int = Field(description="Items compared.")
    outputs_changed: int = Field(description="Items whose output text changed warm.")
    cold_correct_warm_wrong: int = Field(description="Items right cold, wrong warm.")
    cold_wrong_warm_correct: int = Field(description="Items wrong cold, right warm.")
    pvalue: float | None = Field(description="Two-sided McNemar p-value of the score flips.")
    degenerate: str | None = Field(description="Why the test could not run, if so.")
    disagreement: float = Field(description="outputs_changed / n.")


class FaultRequest(StoredRecord):
    """A canary fault the arm's engine was asked to inject (evals.plan.config.FaultConfig)."""

    model_config = PART_CONFIG

    name: str = Field(description="The fault (evals.plan.fault_catalog).")
    rate: float | None = Field(None, description="The share of requests or tokens it "
                                                 "touches.")
    only_with_spec_decode: bool | None = Field(None, description="prefix_hit_overrun only: "
                                               "fire only with speculative decoding on.")


class ArmFaults(StoredRecord):
    """An arm's canary faults: those requested and how often each fired."""

    model_config = PART_CONFIG

    requested: list[FaultRequest] = Field(description="The faults the arm was given.")
    fired: dict[str, int] = Field(description="How often each fault fired in the arm's "
                                              "engine.")


class ArmSpeedRecord(StoredRecord):
    """One arm's request latencies and rates (evals.analyse.speed.ArmSpeed)."""

    model_config = PART_CONFIG

    arm: str | None = Field(None, description="The arm.")
    requests: int | None = Field(None, description="Requests timed.")
    output_tokens: int | None = Field(None, description="Output tokens over them.")
    wall_seconds: float | None = Field(None, description="Wall time of the timed tasks.")
    ttft_p50: float | None = Field(None, description="Median time to first token, seconds.")
    ttft_p95: float | None = Field(None, description="95th percentile time to first token.")
    tpot_p50: float | None = Field(None, description="Median time per output token after "
                                                     "the first, seconds.")
    tpot_p95: float | None = Field(None, description="95th percentile time per output token.")
    tpot_mean: float | None = Field(None, description="Mean time per output token.")
    output_tokens_per_s: float | None = Field(None, description="Output tokens per second.")
    requests_per_s: float | None = Field(None, description="Requests per second.")
    acceptance_rate: float | None = Field(None, description="Accepted / drafted speculative "
                                                            "tokens, where vLLM reports them.")


class SpeedRecord(StoredRecord):
    """The speed comparison of an A/B run (evals.analyse.speed.SpeedComparison)."""

    model_config = PART_CONFIG

    baseline: ArmSpeedRecord | None = Field(None, description="The baseline's latencies.")
    candidate: ArmSpeedRecord | None = Field(None, description="The candidate's latencies.")
    tasks: list[str] | None = Field(None, description="The tasks timed.")
    tpot_speedup: float | None = Field(None, description="Baseline TPOT / candidate TPOT "
                                                         "(above 1: the candidate is faster).")
    ci_low: float | None = Field(None, description="Lower end of the speedup's interval.")
    ci_high: float | None = Field(None, description="Upper end of the speedup's interval.")
    confidence: float | None = Field(None, description="The interval's level (absent in old "
                                                       "records: 0.9).")
    throughput_ratio: float | None = Field(None, description="Candidate / baseline output "
                                                             "tokens per second.")
    min_speedup: float | None = Field(None, description="gate.min_speedup, if set.")
    gate: str | None = Field(None, description="met, missed, undecided, or None (no minimum).")
    note: str | None = Field(None, description="Why the speedup could not be measured, if "
                                               "so.")
    rerun_speedup: float | None = Field(None, description="The baseline's rerun against the "
                                        "baseline (an A/A), where the run has one: how far "
                                        "two engine starts of one config differ.")
    gate_low: float | None = Field(None, description="Lower end of the interval the speed gate "
                                   "decides on: the speedup's, widened by the A/A's factor.")
    gate_high: float | None = Field(None, description="Upper end of that interval.")


class TaskExerciseRecord(StoredRecord):
    """What vLLM reports one arm did on one task (evals.analyse.exercise.TaskExercise)."""

    model_config = PART_CONFIG

    arm: str = Field(description="The arm.")
    task: str = Field(description="The task.")
    gated: bool | None = Field(None, description="Whether the task gates the run.")
    queried_tokens: float | None = Field(None, description="Prompt tokens looked up in the "
                                                           "prefix cache.")
    cached_tokens: float | None = Field(None, description="Prompt tokens found there.")
    drafted_tokens: float | None = Field(None, description="Speculative tokens drafted.")
    accepted_tokens: float | None = Field(None, description="Speculative tokens accepted.")
    preemptions: float | None = Field(None, description="Requests the scheduler preempted.")
    cached_share: float | None = Field(None, description="cached_tokens / queried_tokens.")
    acceptance: float | None = Field(None, description="accepted_tokens / drafted_tokens.")


class ExerciseRecord(StoredRecord):
    """Whether the optimizations the candidate declares engaged
    (evals.analyse.exercise.ExerciseReport)."""

    model_config = PART_CONFIG

    declared: list[str] = Field([], description="What the candidate's engine turns on that the "
                                            "baseline's does not.")
    kv_cache_dtype: dict[str, str | None] = Field({}, description="Each arm's effective KV-cache "
                                                              "dtype.")
    tasks: list[TaskExerciseRecord] = Field([], description="Per arm and task, what vLLM "
                                                        "reports it did.")
    not_exercised: list[str] = Field([], description="Declared optimizations that never "
                                                 "engaged.")
    warnings: list[str] = Field([], description="What a reader of the verdict should know of it.")
