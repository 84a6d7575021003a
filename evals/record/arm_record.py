"""The typed `arms` part of a run's record: each arm's manifest as its worker wrote it
(evals.runner.worker; evals.schemas.ARM_MANIFEST), and per task how it ran or where it was
reused from (evals.dispatch.arms). A compare run's arm holds only its `source` and
lm-eval's config; a drift run's baseline its golden run.

The manifest is a record of its own kind, written by the runner, which adds keys as the
runner learns to measure more: these models type every key the suite writes and reads,
and keep a key a newer worker adds (`extra="allow"`) rather than refuse the whole
summary over it. Engine settings and lm-eval's config are JSON values as vLLM and
lm-eval report them."""

from __future__ import annotations

from pydantic import ConfigDict, Field, JsonValue

from evals.record.run_parts import ArmFaults, PlatformRecord
from evals.record.stored import StoredRecord

_MANIFEST_CONFIG = ConfigDict(extra="allow", ser_json_inf_nan="constants")

Number = int | float


class ArmTaskRecord(StoredRecord):
    """One task of an arm: what it ran (the task marker, evals.schemas.TASK_MARKER) and
    whether it ran in this run or was reused from the run store."""

    model_config = _MANIFEST_CONFIG

    schema_version: int | None = Field(None, description="The task marker's version.")
    task: str | None = Field(None, description="The task.")
    key: str | None = Field(None, description="The content key arm reuse matches on.")
    wall_seconds: Number | None = Field(None, description="The task's wall time.")
    generated_tokens: Number | None = Field(None, description="Tokens the task generated.")
    requests: Number | None = Field(None, description="Requests it sent.")
    timed_requests: Number | None = Field(None, description="Requests with latencies.")
    n_samples: dict[str, int] | None = Field(None, description="Samples lm-eval logged per "
                                                               "(sub)task.")
    task_hashes: dict[str, str] | None = Field(None, description="lm-eval's task hashes.")
    exercise: dict[str, Number] | None = Field(None, description="vLLM's counters over the "
                                               "task (prefix-cache hits, drafts, ...).")
    warm_pass: dict[str, JsonValue] | None = Field(None, description="The warm-cache pass "
                                                   "of a cache-stress task.")
    outcome: str | None = Field(None, description="ran or reused.")
    ran_in: str | None = Field(None, description="The arm directory its engine run was in.")
    reused_from: str | None = Field(None, description="The arm directory it was reused "
                                                      "from.")
    reused_run: str | None = Field(None, description="The run it was reused from.")
    reuse_reason: str | None = Field(None, description="Why its key matched.")
    origin: str | None = Field(None, description="ran or reused, as the marker says.")
    n_items: int | None = Field(None, description="A chunked task: items in its full set.")
    chunks_run: int | None = Field(None, description="Chunks it ran.")
    items_run: int | None = Field(None, description="Items it ran.")
    sequential: dict[str, JsonValue] | None = Field(None, description="The parent's answer "
                                                    "at the last look (decision, items used).")
    waves: list[dict[str, JsonValue]] | None = Field(None, description="A wave task: each "
                                                     "wave's items, their doc ids and vLLM counters.")


class ArmRecord(StoredRecord):
    """One arm's manifest (evals.runner.worker) with its tasks' records."""

    model_config = _MANIFEST_CONFIG

    schema_version: int | None = Field(None, description="The manifest's version.")
    arm: str | None = Field(None, description="The arm's role or name.")
    arm_name: str | None = Field(None, description="The arm's name in the config.")
    mode: str | None = Field(None, description="How the engine ran: offline or server.")
    backend: str | None = Field(None, description="The engine backend, in words.")
    replicate: int | None = Field(None, description="Which replicate of the arm this is.")
    model: str | None = Field(None, description="The model path or name.")
    model_hash: str | None = Field(None, description="Hash of the model's files.")
    source: str | None = Field(None, description="A compare or drift arm: where its outputs "
                                                 "came from.")
    golden_run: str | None = Field(None, description="A drift run's baseline: the golden "
                                                     "run's id.")
    output_dir: str | None = Field(None, description="The arm's directory, where not the "
                                                     "run's arms/<arm>.")
    reused_from: str | None = Field(None, description="The arm directory it was reused "
                                                      "from, if whole.")
    versions: dict[str, str | None] | None = Field(None, description="Library versions the "
                                                   "worker ran with.")
    platform: PlatformRecord | None = Field(None, description="The machine the worker ran "
                                                              "on.")
    requested_engine_args: dict[str, JsonValue] | None = Field(
        None, description="The engine arguments the config asked for.")
    effective_engine_config: dict[str, JsonValue] | None = Field(
        None, description="The engine config as vLLM ran it (setting -> value).")
    effective_engine_config_source: str | None = Field(None, description="Where the "
                                                       "effective config was read.")
    engine_arg_names: list[str] | None = Field(None, description="The engine arguments this "
                                               "vLLM accepts.")
    engine_workarounds: list[str] | None = Field(None, description="Opt-in patches of known "
                                                 "vLLM bugs the engine ran with "
                                                 "(evals.plan.engine_workarounds).")
    sampling: dict[str, JsonValue] | None = Field(None, description="Chat template, decoding "
                                                  "settings and repeats as the arm ran them.")
    lm_eval_config: dict[str, JsonValue] | None = Field(None, description="lm-eval's own "
                                                        "config (a compare run's arm).")
    engine_start_seconds: Number | None = Field(None, description="Seconds to start the "
                                                                  "engine.")
    wall_seconds_last_run: Number | None = Field(None, description="Seconds of the last "
                                                                   "engine run.")
    generation: dict[str, JsonValue] | None = Field(None, description="Tokens, requests and "
                                                    "finish reasons over the run.")
    spec_decode: dict[str, Number] | None = Field(None, description="vLLM's speculative "
                                                  "decoding counters.")
    timeline: dict[str, Number] | None = Field(None, description="When the worker started, "
                                               "imported, got its engine turn, finished.")
    forked: bool | None = Field(None, description="Whether it started from a fork server.")
    engine_processes: list[int] | None = Field(None, description="The engine's process ids.")
    sweep_server: dict[str, JsonValue] | None = Field(None, description="The load sweep's "
                                                      "server engine, when separate.")
    faults: ArmFaults | None = Field(None, description="Canary faults requested and fired.")
    tasks: dict[str, ArmTaskRecord] | None = Field(None, description="Each task's record.")
