"""The A/B config file: YAML, loaded safely, validated, with `extends:` for shared bases.

Unknown keys are errors that name the file and the key path. Engine arguments are
kept verbatim (spelled as vLLM's engine arguments); they are checked against vLLM's
own parser by the runner side (`evals.runner.engine_args`), not here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_serializer,
                      field_validator, model_validator)

from evals.errors import UserError
from evals.paths import REPO_ROOT, TASKS_DIR
from evals.plan.engine_workarounds import ENGINE_WORKAROUNDS
from evals.plan.engine_workarounds import ENV_VAR as WORKAROUNDS_ENV
from evals.plan.fault_catalog import FAULTS, check_applies
from evals.plan.decoding import (ChatConfig, DecodingConfig, check_chat_template,
                                 check_decoding_overrides, check_serving_modes,
                                 resolve_template)
from evals.plan.secret_env import ENV_NAME, SECRET_WORDS, redact_env

DEFAULT_TASKS_DIR = TASKS_DIR
ARM_DEFAULTS = "arm_defaults"
DEFAULT_SEED = 1234
"""The seed of a run that sets none (configs, `compare`)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskSpec(_Strict):
    """One target task and the metric that gates it."""

    name: str = Field(description="lm-eval task name (registered, or under tasks/)")
    metric: str = Field("acc", description="metric whose per-item values are compared")
    filter: str | None = Field(None, description="lm-eval filter name; default: the task's first")
    gate: bool = Field(True, description="False: reported, but cannot fail the run")
    scale: float | None = Field(None, gt=0, description="the metric's full scale (1 or 100); "
                                "default: detected from the values")
    cluster: str | None = Field(None, description="a document field that groups items (e.g. "
                                "a passage id): the tests, intervals and MDE become cluster-"
                                "robust and the report shows the design effect")
    metric_type: Literal["auto", "binary", "continuous"] = Field(
        "auto", description="binary: 0/1 per item (McNemar, Tango); continuous: paired "
        "t-tests; auto: binary when every value is 0/1")


class FaultConfig(_Strict):
    """A canary fault injected into this arm's engine (see evals.faults; tests the gate)."""

    name: Literal[tuple(FAULTS)] = Field(description="the fault: " + ", ".join(FAULTS))
    rate: float | None = Field(None, gt=0, le=1, description="share of requests or tokens it "
                               "touches, chosen by a hash of their content; default per fault")
    only_with_spec_decode: bool = Field(False, description="prefix_hit_overrun only: fire "
                                        "only in an engine with speculative decoding on")

    @model_validator(mode="after")
    def _fill_rate(self) -> FaultConfig:
        if self.only_with_spec_decode and self.name != "prefix_hit_overrun":
            raise ValueError("`only_with_spec_decode` is an option of prefix_hit_overrun only")
        if self.rate is None:
            object.__setattr__(self, "rate", FAULTS[self.name].default_rate)
        return self


class ArmConfig(_Strict):
    """One side of the comparison: an engine configuration."""

    engine: dict[str, Any] = Field(default_factory=dict,
                                   description="vLLM engine keyword arguments, verbatim")
    model: str | None = Field(None, description="override of the top-level model")
    env: dict[str, str] = Field(default_factory=dict, description="environment for the arm "
                                "(a secret's value is recorded as a salted hash only; set "
                                "secrets with `env_from`)")
    env_from: list[str] = Field(default_factory=list, description="names of variables passed "
                                "on from the environment the run starts in (e.g. HF_TOKEN); "
                                "their values are secrets: never written, only hashed")
    mode: Literal["offline", "server", "endpoint", "hf"] = Field(
        "offline", description="offline: vLLM's LLM in-process; server: `vllm serve` on a "
        "loopback port, lm-eval's completions backend against it; endpoint: an already-running "
        "OpenAI-compatible server at base_url; hf: lm-eval's Transformers backend")
    base_url: str | None = Field(None, description="endpoint mode: the server's URL, e.g. "
                                 "http://127.0.0.1:8080/v1")
    api_key_env: str | None = Field(None, description="endpoint mode: name of the environment "
                                    "variable holding the API key (the key is never stored)")
    served_model_name: str | None = Field(None, description="endpoint mode: the model name the "
                                          "server expects in requests; default: `model`")
    concurrency: int = Field(8, ge=1, description="server/endpoint: concurrent requests")
    structured_output: dict[str, Any] | None = Field(
        None, description="structured output (guided decoding) on every generation request: "
        "vLLM's StructuredOutputsParams fields, e.g. {choice: [...]}, {regex: ...}, {json: schema}")
    lora_adapter: str | None = Field(
        None, description="a PEFT LoRA adapter directory served unmerged on the arm's model "
        "(vLLM LoRA: offline or server mode), e.g. against a merged checkpoint in the other arm")
    cache_stress: bool = Field(False, description="run the items twice in one engine: cold, "
                               "then warm in another order; warm vs cold is reported")
    faults: list[FaultConfig] = Field(default_factory=list, description="canary faults "
                                      "injected into this arm's engine (`nox -s canary`)")
    engine_workarounds: list[Literal[tuple(ENGINE_WORKAROUNDS)]] = Field(
        default_factory=list, description="opt-in patches of known vLLM bugs in this arm's "
        "engine (evals.plan.engine_workarounds: " + ", ".join(ENGINE_WORKAROUNDS) + "); "
        "recorded and reported, refused on a vLLM without the bug")
    decoding: DecodingConfig | None = Field(
        None, description="this arm's overrides of the top-level `decoding:`; each setting "
        "that makes the arms differ must be listed in `intended_change` as `decoding.<name>`")

    @model_validator(mode="after")
    def _mode_fits(self) -> ArmConfig:
        if self.mode == "endpoint" and not self.base_url:
            raise ValueError("mode `endpoint` needs `base_url`")
        if self.mode != "endpoint" and (self.base_url or self.api_key_env
                                        or self.served_model_name):
            raise ValueError("`base_url`, `api_key_env` and `served_model_name` are for mode "
                             "`endpoint` only")
        both = sorted(set(self.env) & set(self.env_from))
        if both:
            raise ValueError(f"{both[0]} is in both `env` and `env_from`; keep one")
        bad = [name for name in self.env_from if not ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"`env_from` entry {bad[0]!r} is not an environment variable name")
        if self.mode == "endpoint" and self.engine:
            raise ValueError("an endpoint arm runs no engine; `engine` must be empty")
        if self.structured_output is not None and self.mode == "hf":
            raise ValueError("`structured_output` needs a vLLM arm (offline, server or endpoint)")
        if self.lora_adapter and self.mode not in ("offline", "server"):
            raise ValueError("`lora_adapter` needs mode `offline` or `server` (vLLM serves it)")
        if WORKAROUNDS_ENV in self.env or WORKAROUNDS_ENV in self.env_from:
            raise ValueError(f"{WORKAROUNDS_ENV} is set by `engine_workarounds`, not by `env`")
        if self.engine_workarounds and self.mode not in ("offline", "server"):
            raise ValueError("`engine_workarounds` patch a vLLM engine this process starts: "
                             "mode `offline` or `server` only")
        if len(set(self.engine_workarounds)) != len(self.engine_workarounds):
            raise ValueError("a workaround is listed twice under `engine_workarounds`")
        names = [f.name for f in self.faults]
        if len(set(names)) != len(names):
            raise ValueError("a fault is listed twice under `faults`")
        for fault in self.faults:
            problem = check_applies(fault.model_dump(), self.engine, self.mode)
            if problem:
                raise ValueError(f"fault `{fault.name}` cannot apply to this arm: {problem}")
        return self

    @field_validator("env", mode="before")
    @classmethod
    def _env_as_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        return value


class Arms(_Strict):
    baseline: ArmConfig
    candidate: ArmConfig


SHIFT_MARGIN_NATS = 5e-5
"""gate.shift_margin's default (see its description)."""


class SpeedGateConfig(_Strict):
    """`gate.speed`: the load curve as a gate (needs `speed:`); its own gate step."""

    min_speedup_at: dict[int, float] = Field(
        default_factory=dict, description="{concurrency level: minimum speed-up} (candidate "
        "over baseline, output tokens per second of request time): missed when the level's "
        "interval lies below it (exit 1), undecided when it straddles it (PASS -> INCONCLUSIVE)")
    min_slo_concurrency: int | None = Field(
        None, ge=1, description="the candidate's highest concurrency meeting `speed.slo` must "
        "be at least this; below it the run fails (exit 1)")

    @model_validator(mode="after")
    def _something(self) -> SpeedGateConfig:
        if not self.min_speedup_at and self.min_slo_concurrency is None:
            raise ValueError("give `min_speedup_at`, `min_slo_concurrency` or both")
        bad = [k for k, v in self.min_speedup_at.items() if k < 1 or not v > 0]
        if bad:
            raise ValueError(f"`min_speedup_at` needs levels of at least 1 and positive "
                             f"minimums (level {bad[0]})")
        return self


class GateConfig(_Strict):
    alpha: float = Field(0.05, gt=0, lt=0.5, description="one-sided significance level")
    margin: float = Field(0.02, gt=0, lt=1,
                          description="non-inferiority margin in accuracy units (0.02 = 2 points)")
    correction: Literal["holm", "none"] = "holm"
    bootstrap_resamples: int = Field(10_000, ge=100)
    pooled: bool = Field(False, description="also gate on one exact stratified McNemar test "
                         "over all gated 0/1 tasks (in the Holm family with the per-task "
                         "tests): catches small drops spread over tasks that no task shows")
    logprob: Literal["warn", "fail", "off"] = Field(
        "warn", description="a significant distribution shift (the shift test against the A/A "
        "rerun; needs `logprobs` and `noise_floor`) on a gated task whose accuracy passes: "
        "`warn` reports it, `fail` makes the run a REGRESSION, `off` ignores it")
    answer_distribution: Literal["warn", "fail", "off"] = Field(
        "warn", description="a sampled task's answer-distribution check (`repeats: k`: do the "
        "arms sample different answers at some item? Holm over the gated tasks) on a gated "
        "task: `warn` reports it, `fail` makes a PASS or INCONCLUSIVE run a REGRESSION, "
        "`off` ignores it")
    shift_margin: float = Field(
        SHIFT_MARGIN_NATS, ge=0, le=1,
        description="delta of the distribution-shift test, nats: the mean per-item KL excess "
        "over the A/A rerun (KL(b||c) - KL(b||rerun)) that still counts as engine noise; a "
        "task is shifted only when the excess is beyond it with confidence. The default "
        "5e-5 is 25x the largest mean excess of GPU A/As of one engine reported in issue 52 "
        "(2.1e-6, one H100, vLLM 0.26.0), 10x a benign MTP + prefix caching change's "
        "(5.0e-6), and a third of the weakly noised model's smallest (1.5e-4 on CPU); "
        "docs/distribution_shift.md has the measurements")
    min_speedup: float | None = Field(
        None, gt=0, description="required candidate speedup (mean time per output token, "
        "baseline / candidate): missed when its interval lies below, undecided when it straddles")
    speed: SpeedGateConfig | None = Field(
        None, description="the load curve's gate (`speed:` sweeps): a minimum speed-up at "
        "given concurrency levels, a minimum SLO-safe concurrency of the candidate")


class SyntheticPrompts(_Strict):
    """Load-sweep prompts of seeded random token ids of one length."""

    input_tokens: int = Field(ge=1, le=131_072, description="prompt length in tokens")
    output_tokens: int = Field(ge=1, le=32_768, description="tokens generated per request")


class SloConfig(_Strict):
    """A latency SLO: the highest concurrency whose p95s are at or under these (ms)."""

    ttft_p95_ms: float | None = Field(None, gt=0, description="time to first token, p95, ms")
    tpot_p95_ms: float | None = Field(None, gt=0, description="time per output token, p95, ms")

    @model_validator(mode="after")
    def _some_target(self) -> SloConfig:
        if self.ttft_p95_ms is None and self.tpot_p95_ms is None:
            raise ValueError("give `ttft_p95_ms`, `tpot_p95_ms` or both")
        return self


class SpeedSweepConfig(_Strict):
    """A load sweep on both arms' own `vllm serve` after their accuracy items: per level a
    warm-up, then `requests_per_level` streamed requests at that concurrency."""

    concurrency: list[int] = Field(description="concurrency levels, rising, e.g. [1, 4, 16]")
    requests_per_level: int = Field(ge=1, le=100_000, description="timed requests per level")
    prompts: str | SyntheticPrompts = Field(
        description="a task of this config (its prompts, as the arm's samples hold them, in "
        "order and cycled) or {input_tokens, output_tokens} (seeded random token ids)")
    output_tokens: int | None = Field(
        None, ge=1, le=32_768, description="with task prompts: tokens generated per request "
        "(default 64; end of sequence ignored, so both arms generate the same count)")
    slo: SloConfig | None = Field(None, description="the latency SLO whose highest safe "
                                  "concurrency is reported per arm")
    request_timeout_s: float = Field(600, gt=0, le=3600, description="one request's limit")
    level_timeout_s: float = Field(1800, gt=0, le=24 * 3600,
                                   description="one level's limit; its requests then fail")
    on_reuse: Literal["recorded", "rerun"] = Field(
        "recorded", description="an arm whose accuracy items are reused from the run store: "
        "`recorded` reuses the sweep recorded with them (the same server and sweep settings; "
        "else it runs again), `rerun` starts the arm's server to sweep again")

    @field_validator("concurrency")
    @classmethod
    def _rising(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("the concurrency list is empty; give the levels, e.g. [1, 4, 16]")
        if any(c < 1 for c in value):
            raise ValueError(f"concurrency levels must be at least 1, got {value}")
        if any(b <= a for a, b in zip(value, value[1:])):
            raise ValueError(f"the concurrency levels must rise strictly, got {value}")
        return value

    @model_validator(mode="after")
    def _output_once(self) -> SpeedSweepConfig:
        if isinstance(self.prompts, SyntheticPrompts) and self.output_tokens is not None:
            raise ValueError("with synthetic prompts, give `output_tokens` under `prompts` only")
        return self

    def tokens_per_request(self) -> int:
        if isinstance(self.prompts, SyntheticPrompts):
            return self.prompts.output_tokens
        return self.output_tokens or 64


class SequentialConfig(_Strict):
    """Opt-in early stop: items run in a seeded random order, in chunks; the candidate stops
    once a regression is established or non-inferiority is shown (see evals.analyse.early_stop)."""

    chunk: int = Field(100, ge=10, description="items per look")


class DriftSettings(_Strict):
    """`nox -s drift`: which arm is the deployment, and the control chart over weekly runs."""

    deployment: str | None = Field(None, description="name the runs are tracked under; "
                                   "default: the config's name")
    arm: Literal["baseline", "candidate"] = Field(
        "candidate", description="the arm that is the deployment (rerun by each drift run)")
    lam: float = Field(0.2, gt=0, le=1, description="EWMA weight of the newest run")
    L: float = Field(2.7, gt=0, description="control-limit width in standard errors")


class ABConfig(_Strict):
    """A whole A/B comparison."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    model: str
    tasks: list[TaskSpec] = Field(min_length=1)
    limit: int | None = Field(None, ge=1)
    num_fewshot: int | None = Field(None, ge=0)
    seed: int = DEFAULT_SEED
    include_path: str | None = Field(None, description="extra lm-eval task folder; default tasks/")
    expect_identical_arms: bool = Field(
        False, description="True for an A/A check; otherwise identical arms are an error")
    noise_floor: bool = Field(
        False, description="run the baseline twice and report its self-disagreement (A/A)")
    logprobs: int = Field(
        0, ge=0, le=20, description="top-k log-probabilities recorded per generated token "
        "beside each offline arm's samples (vLLM `logprobs=k`), for the distribution-shift "
        "analysis (KL, top-1 agreement, flip-prone items); 0: not recorded")
    sequential: SequentialConfig | None = Field(
        None, description="early stop over interim looks; needs 0/1 metrics")
    chat: ChatConfig | None = Field(
        None, description="prompts through a chat template with a shared system prompt "
        "(offline arms; docs/chat_and_sampling.md)")
    decoding: DecodingConfig | None = Field(
        None, description="sampling settings of every generation request (temperature, "
        "top_p, top_k, min_p, max_tokens); default: each task's own (greedy)")
    repeats: int = Field(1, ge=1, le=1000, description="samples per generation item and arm; "
                         "with sampling, repeat r of an item has the same seed in both arms")
    arms: Arms
    intended_change: list[str] | None = Field(
        None, description="what the arms are meant to differ in: vLLM engine-argument names, "
        "plus `model`, `env` and `mode` for the arm's model, environment and mode, and "
        "`decoding.<setting>` for an arm's decoding override. Before any arm "
        "runs, both arms' effective engine configs are resolved and compared; a difference in "
        "anything not listed stops the run. null: every engine argument the arms set differently "
        "is intended")
    gate: GateConfig = GateConfig()
    drift: DriftSettings = DriftSettings()
    speed: SpeedSweepConfig | None = Field(
        None, description="a load sweep on both server arms after their accuracy items: "
        "latency and throughput per concurrency level, the crossover, the SLO-safe concurrency")
    hardware: Literal["any", "gpu"] = Field(
        "any", description="`gpu`: the arms are meant for vLLM on a GPU (configs/gpu/); where "
        "the engines would run on vLLM's CPU backend the run stops before any engine starts")
    secret_env_names: list[str] = Field(
        default_factory=list, description="further names, or parts of names, of environment "
        "variables whose values are secrets (besides " + ", ".join(SECRET_WORDS) + "; matched "
        "anywhere in a name, case-insensitively): recorded as a salted hash only")
    description: str = ""
    source: str = Field("", exclude=True, description="the file this was loaded from")

    @field_validator("secret_env_names")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if not re.fullmatch(r"[A-Za-z0-9_]+", name)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not (part of) an environment variable name")
        return value

    @field_serializer("arms", mode="wrap")
    def _redact_secrets(self, arms: Arms, handler) -> Any:
        """Every dump of a config (summary.json, run ids) holds secrets as markers only."""
        data = handler(arms)
        for arm in data.values():
            arm["env"] = redact_env(arm["env"], self.secret_env_names)
        return data

    def arm(self, name: str) -> ArmConfig:
        return getattr(self.arms, name)

    def arm_model(self, name: str) -> str:
        return self.arm(name).model or self.model


def deployment_name(config: ABConfig) -> str:
    """The name the run store tracks a config's runs under: `drift.deployment`, else the
    config's name."""
    return config.drift.deployment or config.name


def _deep_merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (YAML would silently keep
    the last value)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key `{key}` is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path, chain: tuple[Path, ...] = ()) -> dict:
    if path in chain:
        raise UserError(f"{chain[0]}: `extends` loops back to {path}.")
    if not path.is_file():
        where = f" (extended from {chain[-1]})" if chain else ""
        raise UserError(f"config file {path} does not exist{where}.")
    try:
        data = yaml.load(path.read_bytes().decode("utf-8"), Loader=_UniqueKeyLoader)
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (invalid UTF-8); a config is YAML text.") \
            from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', exc)}.") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}.")
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise UserError(f"{path}: `extends` must be a path to another config file.")
    base = _read_yaml((path.parent / parent).resolve(), chain + (path,))
    return _deep_merge(base, data)


def _format_error(path: Path, error: dict) -> str:
    loc = ".".join(str(part) for part in error["loc"]) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{path}: unknown key `{loc}`."
    if kind == "missing":
        return f"{path}: missing required key `{loc}`."
    if kind == "value_error":  # our own validators: the message says it all
        return f"{path}: `{loc}`: {error['msg'].removeprefix('Value error, ')}."
    return f"{path}: `{loc}`: {error['msg']} (got {error.get('input')!r})."


def _resolve_model(value: str, base_dir: Path) -> str:
    """Local paths are made absolute; anything else is a hub id, left as is."""
    if value.startswith(("/", "./", "../", "~")) or (base_dir / value).exists() \
            or (REPO_ROOT / value).exists():
        for candidate in (Path(value).expanduser(), base_dir / value, REPO_ROOT / value):
            if candidate.exists():
                return str(candidate.resolve())
    return value


def _draft_resolved(engine: dict, base_dir: Path) -> dict:
    """A draft model's path (`speculative_config: {model: ...}`) resolved as a model's."""
    spec = engine.get("speculative_config")
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), str):
        return engine
    return {**engine, "speculative_config": {**spec, "model": _resolve_model(spec["model"],
                                                                            base_dir)}}


def apply_arm_defaults(data: dict, source: Path | str) -> dict:
    """`arm_defaults:` (settings every arm shares, e.g. a CPU environment) deep-merged under
    each arm; the key itself is gone afterwards, so a config written either way is the same
    config (and has the same run id)."""
    defaults = data.get(ARM_DEFAULTS)
    if defaults is None:
        return data
    if not isinstance(defaults, dict):
        raise UserError(f"{source}: `{ARM_DEFAULTS}` must be a mapping of arm settings.")
    data = {k: v for k, v in data.items() if k != ARM_DEFAULTS}
    arms = data.get("arms")
    if isinstance(arms, dict):
        data["arms"] = {name: _deep_merge(defaults, arm) if isinstance(arm, dict) else arm
                        for name, arm in arms.items()}
    return data


def parse_config(data: dict, source: Path) -> ABConfig:
    data = apply_arm_defaults(data, source)
    if "tasks" in data and isinstance(data["tasks"], list):
        # a bare task name is shorthand for {name: ...}
        data["tasks"] = [{"name": t} if isinstance(t, str) else t for t in data["tasks"]]
    try:
        config = ABConfig.model_validate({**data, "source": str(source)})
    except ValidationError as exc:
        # an unknown key usually explains the rest (a misspelt required key), so it goes first
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = _format_error(source, errors[0])
        more = f" ({len(errors) - 1} more problem(s) in the same file)" if len(errors) > 1 else ""
        raise UserError(first + more) from None
    if config.sequential and any(config.arm(a).cache_stress for a in ("baseline", "candidate")):
        raise UserError(f"{source}: `sequential` and an arm's `cache_stress` cannot be combined "
                        "(the warm pass needs the full item set).")
    names = [t.name for t in config.tasks]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UserError(f"{source}: task `{dup}` is listed twice under `tasks`.")
    if config.speed is not None or config.gate.speed is not None:
        check_speed_sweep(config, source)
    if config.gate.min_speedup is not None and not config.noise_floor:
        raise UserError(f"{source}: `gate.min_speedup` needs `noise_floor: true`: two engine "
                        "starts of one config differ in speed by more than a run's interval "
                        "shows (0.79x to 1.41x in GPU A/As), so the gate widens the interval "
                        "by the baseline rerun's own difference.")
    check_decoding_overrides(config, source)
    check_serving_modes(config, source)
    return config


def check_speed_sweep(config: ABConfig, source: Path | str) -> None:
    """A sweep needs server arms (it runs on the arm's own `vllm serve`), task prompts from a
    task of the config, and no level above an arm's `max_num_seqs` (vLLM would queue the
    rest: the level would not run at its concurrency)."""
    speed, gate = config.speed, config.gate.speed
    if speed is None:
        raise UserError(f"{source}: `gate.speed` gates the load sweep, but there is no "
                        "`speed:` sweep; add one or drop `gate.speed`.")
    if gate is not None:
        missing = sorted(set(gate.min_speedup_at) - set(speed.concurrency))
        if missing:
            raise UserError(f"{source}: `gate.speed.min_speedup_at` names level {missing[0]}, "
                            f"which `speed.concurrency` {speed.concurrency} does not sweep.")
        if gate.min_slo_concurrency is not None and speed.slo is None:
            raise UserError(f"{source}: `gate.speed.min_slo_concurrency` needs `speed.slo` "
                            "(the targets it is measured against).")
    for name in ("baseline", "candidate"):
        arm = config.arm(name)
        if arm.mode != "server":
            raise UserError(f"{source}: `speed` sweeps server arms only (the arm's own `vllm "
                            f"serve`); arm {name} has mode `{arm.mode}` - set its `mode: "
                            "server` or drop `speed`.")
        cap = arm.engine.get("max_num_seqs")
        if isinstance(cap, int) and not isinstance(cap, bool) and speed.concurrency[-1] > cap:
            raise UserError(f"{source}: `speed.concurrency` level {speed.concurrency[-1]} is "
                            f"above arm {name}'s max_num_seqs ({cap}): the server runs at most "
                            f"{cap} requests at once and queues the rest. Cap the levels at "
                            f"{cap} or raise max_num_seqs.")
    if isinstance(speed.prompts, str) and speed.prompts not in {t.name for t in config.tasks}:
        raise UserError(f"{source}: `speed.prompts` names task `{speed.prompts}`, which is not "
                        "under `tasks`; name one of them, or give {input_tokens, "
                        "output_tokens}.")


def is_study(data: dict) -> bool:
    """More than two arms, a `baseline:` name, or a `factorial:` design (evals.plan.study)."""
    arms = data.get("arms")
    return "factorial" in data or "baseline" in data or (isinstance(arms, dict) and len(arms) > 2)


def load_config(path: str | Path) -> ABConfig:
    """Read, merge `extends`, validate; model paths resolved against the file and the repo.
    A study (evals.plan.study) is refused: `load_run_config` reads both."""
    path = Path(path).resolve()
    data = _read_yaml(path)
    if is_study(data):
        raise UserError(f"{path}: this command takes a two-arm config (`arms:` with `baseline` "
                        "and `candidate`); this file is a study (more arms or `factorial:`), "
                        "which `ab` runs.")
    return config_from_data(data, path)


def read_config_data(path: str | Path) -> tuple[dict, Path]:
    """The YAML mapping with `extends` merged, and the file's absolute path."""
    path = Path(path).resolve()
    return _read_yaml(path), path


def config_from_data(data: dict, path: Path) -> ABConfig:
    """Validate a config mapping read from `path`; model paths resolved against it."""
    config = parse_config(data, path)
    updates: dict[str, Any] = {"model": _resolve_model(config.model, path.parent)}
    arms = {}
    for name in ("baseline", "candidate"):
        arm = config.arm(name)
        arms[name] = arm.model_copy(update={
            "model": _resolve_model(arm.model, path.parent) if arm.model else None,
            "engine": _draft_resolved(arm.engine, path.parent),
            "lora_adapter": (_resolve_model(arm.lora_adapter, path.parent)
                             if arm.lora_adapter else None)})
    updates["arms"] = Arms(**arms)
    updates["chat"] = resolve_template(config.chat, path.parent)
    if config.include_path:
        updates["include_path"] = str((path.parent / config.include_path).resolve())
    return config.model_copy(update=updates)


def check_local_models(config: ABConfig) -> None:
    """A path-looking model that does not exist is bad input, found before any engine starts."""
    for name in ("baseline", "candidate"):
        model = config.arm_model(name)
        # "gpt2" and "Qwen/Qwen2.5-7B" are hub ids; "/x", "./x", "a/b/c" are paths
        looks_local = model.startswith(("/", ".", "~")) or model.count("/") > 1
        if looks_local and not Path(model).exists():
            raise UserError(f"{config.source}: model path `{model}` (arm {name}) does not exist.")
        adapter = config.arm(name).lora_adapter
        if adapter and not (Path(adapter) / "adapter_config.json").is_file():
            raise UserError(f"{config.source}: arms.{name}.lora_adapter `{adapter}` is not a "
                            "PEFT adapter directory (no adapter_config.json).")
    check_chat_template(config)
