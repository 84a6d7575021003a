"""Model preflight ("doctor"): file checks of each arm's model directory before any engine starts.

Only JSON and template files are read (no vLLM, no torch, no weights). What it catches:

- an unmerged LoRA adapter where a merged checkpoint was meant (`adapter_config.json`,
  `adapter_model.*`): vLLM would serve the base model, or nothing;
- a directory that is not a model (no `config.json`, or not a directory at all);
- `use_cache: false` in `config.json` (or its `text_config`), typical of a checkpoint saved
  from training with gradient checkpointing;
- the checkpoint's `torch_dtype` / `dtype` differing from the arm's engine `dtype`;
- a `generation_config.json` that changes decoding defaults: vLLM makes them the default
  sampling parameters (engine argument `generation_config`, default "auto");
- chat templates that differ between the two arms.

Hub ids are not downloaded: they get an info finding. `diagnose_config` runs all of it for
both arms of an A/B config; `python -m evals doctor MODEL_OR_CONFIG` prints the findings and
exits 2 when any is an error.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evals.plan.config import ABConfig, load_config
from evals.errors import UserError
from evals.hardware import Platform, probe
from evals.paths import ARMS
from evals.preflight.cpu_support import gpu_refusal, refusal, unsupported_settings

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

# decoding parameters vLLM takes from generation_config.json (ModelConfig.
# get_diff_sampling_param), with the value that leaves sampling unchanged
NEUTRAL_DECODING = {"temperature": 1.0, "top_p": 1.0, "top_k": (0, -1), "min_p": 0.0,
                    "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
_DTYPE_NAMES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16",
                "fp16": "float16", "half": "float16", "float32": "float32", "fp32": "float32",
                "float": "float32"}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the doctor found; `message` names the file it is about."""

    severity: Severity
    code: str
    message: str
    arm: str | None = None  # "baseline", "candidate", "baseline, candidate", or None

    def line(self) -> str:
        where = f"[{self.arm}] " if self.arm else ""
        return f"{self.severity:<7} {self.code}: {where}{self.message}"

    def to_dict(self) -> dict:
        return {"severity": self.severity, "code": self.code, "message": self.message,
                "arm": self.arm}


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """The findings for one model directory or one A/B config."""

    source: str
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def has_errors(self) -> bool:
        return bool(self.errors)

    def lines(self) -> list[str]:
        counts = {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}
        head = (f"doctor: {self.source}: {counts['error']} error(s), {counts['warning']} "
                f"warning(s), {counts['info']} note(s)")
        return [head] + ["  " + f.line() for f in self.findings]

    def warning_lines(self) -> list[str]:
        """Lines for summary.json `warnings`: every error and warning."""
        return [f"model preflight: {f.line()}" for f in self.findings if f.severity != "info"]

    def check(self) -> None:
        """Raises UserError naming every error finding (warnings pass)."""
        if self.errors:
            listed = "; ".join(("[" + f.arm + "] " if f.arm else "") + f.message
                               for f in self.errors)
            raise UserError(f"{self.source}: the model preflight found {len(self.errors)} "
                            f"error(s): {listed}")

    def to_dict(self) -> dict:
        return {"source": self.source, "findings": [f.to_dict() for f in self.findings],
                "errors": len(self.errors), "warnings": len(self.warnings)}


def _read_json(path: Path) -> tuple[dict | None, str | None]:
    """(mapping, None), (None, None) when absent, or (None, why) when unreadable."""
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path} is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return None, f"{path} does not hold a JSON object"
    return data, None


def looks_local(model: str) -> bool:
    """"gpt2" and "Qwen/Qwen2.5-7B" are hub ids; "/x", "./x", "~/x", "a/b/c" are paths, and so
    is "models/x" when a local folder `models` exists."""
    return (model.startswith(("/", ".", "~")) or model.count("/") > 1 or Path(model).exists()
            or ("/" in model and Path(model.split("/")[0]).is_dir()))


def _adapter(path: Path, has_config: bool) -> list[Finding]:
    weights = sorted(p.name for p in path.glob("adapter_model.*"))
    config_path = path / "adapter_config.json"
    if not weights and not config_path.exists():
        return []
    adapter, problem = _read_json(config_path)
    base = (adapter or {}).get("base_model_name_or_path")
    kind = {"LORA": "LoRA"}.get(str((adapter or {}).get("peft_type", "LORA")), "PEFT")
    named = config_path if config_path.exists() else path / weights[0]
    base_text = (f"adapter_config.json names the base model `{base}`" if base
                 else problem or "no adapter_config.json names its base model")
    if has_config:
        what = (f"{named}: {path} holds a model and an unmerged {kind} adapter; vLLM loads "
                "config.json and the base weights and ignores the adapter, so the arm would "
                "evaluate the base model")
    else:
        what = (f"{named}: {path} is an unmerged {kind} adapter, not a model (it has no "
                "config.json of its own)")
    return [Finding("error", "unmerged-lora", f"{what}; {base_text}. vLLM serves an adapter "
                    "only with the engine argument `enable_lora: true` plus a LoRA request per "
                    "prompt (which this suite does not send): merge it into the base model "
                    "(peft `merge_and_unload()`, then `save_pretrained`) and point the arm at "
                    "the merged checkpoint.")]


def _use_cache(config_path: Path, config: dict) -> list[Finding]:
    out = []
    for where, section in (("", config), ("text_config.", config.get("text_config"))):
        if isinstance(section, dict) and section.get("use_cache") is False:
            out.append(Finding(
                "warning", "use-cache-off",
                f"{config_path} sets `{where}use_cache: false`, typical of a checkpoint saved "
                "from training with gradient checkpointing: check it is the final, merged "
                "checkpoint; Hugging Face generation (and tools built on it) would decode "
                "without a KV cache. Set it to true once that is confirmed."))
    return out


def checkpoint_dtype(config: dict) -> str | None:
    for section in (config, config.get("text_config")):
        if isinstance(section, dict):
            value = section.get("torch_dtype") or section.get("dtype")
            if isinstance(value, str):
                return _DTYPE_NAMES.get(value.removeprefix("torch."), value)
    return None


def _dtype(config_path: Path, config: dict, arm_dtype: str | None) -> list[Finding]:
    if not arm_dtype or str(arm_dtype).lower() == "auto":
        return []
    stored, wanted = checkpoint_dtype(config), _DTYPE_NAMES.get(str(arm_dtype).lower(), arm_dtype)
    if stored is None or stored == wanted:
        return []
    risk = " (bfloat16 -> float16 can overflow)" if (stored, wanted) == ("bfloat16", "float16") else ""
    return [Finding("warning", "dtype-mismatch",
                    f"{config_path} stores the weights as {stored}, but the arm's engine "
                    f"`dtype` is {wanted}: vLLM casts the weights at load time, so an accuracy "
                    f"change may come from the cast{risk} rather than from the optimization "
                    "under test.")]


def decoding_defaults(path: Path) -> dict:
    """The decoding parameters a generation_config.json changes from vLLM's neutral values."""
    data, _ = _read_json(path / "generation_config.json")
    if not data:
        return {}
    changed = {}
    for name, neutral in NEUTRAL_DECODING.items():
        value = data.get(name)
        neutral_values = neutral if isinstance(neutral, tuple) else (neutral,)
        if value is not None and value not in neutral_values:
            changed[name] = value
    if data.get("max_new_tokens") is not None:
        changed["max_new_tokens"] = data["max_new_tokens"]
    if "do_sample" in data and (changed or data["do_sample"]):
        changed["do_sample"] = data["do_sample"]
    return changed


def _generation(path: Path, generation_config: str | None) -> list[Finding]:
    changed = decoding_defaults(path)
    if not changed or generation_config == "vllm":
        return []
    shown = ", ".join(f"{k}={v}" for k, v in changed.items())
    ignored = (" vLLM ignores `do_sample: false`, so it samples where Hugging Face would "
               "decode greedily." if changed.get("do_sample") is False else "")
    return [Finding("warning", "generation-config",
                    f"{path / 'generation_config.json'} changes decoding defaults ({shown}). "
                    "vLLM applies them by default (engine argument `generation_config`, default "
                    "'auto') to every request that leaves them unset - in a served deployment "
                    "too - while this suite's lm-eval requests set their own sampling "
                    f"parameters.{ignored} Set `generation_config: vllm` in the arm's engine "
                    "for vLLM's neutral defaults, or make sure the deployment is meant to "
                    "sample this way.")]


def chat_template(path: Path) -> tuple[str, str] | None:
    """(sha256 of the chat template the tokenizer loads, the file it comes from), or None."""
    jinja = path / "chat_template.jinja"
    if jinja.is_file():
        return hashlib.sha256(jinja.read_bytes()).hexdigest(), str(jinja)
    for name in ("tokenizer_config.json", "chat_template.json"):
        data, _ = _read_json(path / name)
        template = (data or {}).get("chat_template")
        if template:
            text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
            return hashlib.sha256(text.encode()).hexdigest(), str(path / name)
    return None


def diagnose_model(path: str | Path, *, arm_dtype: str | None = None, arm: str | None = None,
                   generation_config: str | None = None) -> tuple[Finding, ...]:
    """File checks of one model directory (a hub id gets one info finding).

    `arm_dtype` and `generation_config` are the arm's engine arguments of those names.
    """
    findings = _model_findings(str(path), arm_dtype, generation_config)
    return tuple(Finding(f.severity, f.code, f.message, arm) for f in findings)


def _model_findings(model: str, arm_dtype: str | None, generation_config: str | None
                    ) -> list[Finding]:
    if not looks_local(model):
        return [Finding("info", "hub-id", f"`{model}`: not checked (hub id); the doctor reads "
                        "local model directories only.")]
    directory = Path(model).expanduser()
    if not directory.exists():
        return [Finding("error", "model-missing", f"model path {directory} does not exist.")]
    if not directory.is_dir():
        return [Finding("error", "not-a-directory", f"model path {directory} is a file, not a "
                        "model directory (config.json, tokenizer and weights).")]
    config_path = directory / "config.json"
    config, problem = _read_json(config_path)
    findings = _adapter(directory, config_path.exists())
    if problem:
        findings.append(Finding("error", "bad-config", problem + "."))
    elif config is None and not findings:  # an adapter's finding already says it
        findings.append(Finding("error", "missing-config", f"{directory} has no config.json: "
                                "it is not a Hugging Face model directory."))
    if config is not None:
        findings += _use_cache(config_path, config) + _dtype(config_path, config, arm_dtype)
    return findings + _generation(directory, generation_config)


def _merge_arms(per_arm: dict[str, tuple[Finding, ...]]) -> list[Finding]:
    """Findings identical for both arms (same model, same settings) are listed once."""
    base, cand = per_arm["baseline"], per_arm["candidate"]
    cand_keys = [(f.severity, f.code, f.message) for f in cand]
    base_keys = [(f.severity, f.code, f.message) for f in base]
    merged = [Finding(f.severity, f.code, f.message, "baseline, candidate")
              if (f.severity, f.code, f.message) in cand_keys else f for f in base]
    return merged + [f for f, key in zip(cand, cand_keys) if key not in base_keys]


def _between_arms(config: ABConfig) -> list[Finding]:
    models = {arm: config.arm_model(arm) for arm in ARMS}
    if models["baseline"] == models["candidate"] or not all(
            Path(m).is_dir() for m in models.values()):
        return []
    out = []
    templates = {arm: chat_template(Path(m)) for arm, m in models.items()}
    hashes = {arm: t[0] if t else None for arm, t in templates.items()}
    if hashes["baseline"] != hashes["candidate"]:
        shown = "; ".join(f"{arm}: " + (f"{t[1]} (sha256 {t[0][:12]})" if t else "none")
                          for arm, t in templates.items())
        out.append(Finding("warning", "chat-template-differs",
                           f"the arms' chat templates differ ({shown}): prompts rendered with "
                           "a chat template (lm-eval --apply_chat_template, a chat endpoint) "
                           "differ between the arms, so a change in accuracy may come from the "
                           "template rather than from the optimization under test."))
    decoding = {arm: {} if config.arm(arm).engine.get("generation_config") == "vllm"
                else decoding_defaults(Path(m)) for arm, m in models.items()}
    if decoding["baseline"] != decoding["candidate"]:
        out.append(Finding("warning", "decoding-defaults-differ",
                           f"the arms' default decoding parameters differ (baseline "
                           f"{models['baseline']}/generation_config.json: "
                           f"{decoding['baseline'] or 'neutral'}; candidate "
                           f"{models['candidate']}/generation_config.json: "
                           f"{decoding['candidate'] or 'neutral'})."))
    return out


def _cpu_findings(config: ABConfig, platform: Platform | None) -> tuple[Finding, ...]:
    """What vLLM's CPU backend cannot run on this CPU (evals.preflight.cpu_support), as
    errors: the same findings preflight stops a run with."""
    platform = platform or probe()
    why = gpu_refusal(config, platform)
    if why:  # the CPU rules are moot for a config meant for GPUs
        return (Finding("error", "gpu-required", why),)
    found = unsupported_settings(config, platform)
    return tuple(Finding("error", "cpu-unsupported", refusal([u], platform),
                         u.arm.removeprefix("arms.")) for u in found)


def diagnose_config(config: ABConfig, platform: Platform | None = None) -> DoctorReport:
    """Preflight of both arms' models, and of what this CPU can run (`platform`: default this
    machine). Call before any arm runs; `report.check()` raises on errors,
    `report.warning_lines()` and `report.to_dict()` go into the run's summary."""
    per_arm = {}
    for arm in ARMS:
        engine = config.arm(arm).engine
        per_arm[arm] = diagnose_model(config.arm_model(arm), arm_dtype=engine.get("dtype"),
                                      arm=arm, generation_config=engine.get("generation_config"))
    findings = _merge_arms(per_arm) + _between_arms(config) + list(_cpu_findings(config, platform))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return DoctorReport(source=config.source or "config",
                        findings=tuple(sorted(findings, key=lambda f: order[f.severity])))


def diagnose_path(target: str) -> DoctorReport:
    """What `python -m evals doctor` checks: a config file (.yaml) or a model directory."""
    path = Path(target).expanduser()
    if path.suffix in (".yaml", ".yml"):
        return diagnose_config(load_config(path))
    if path.is_file():
        raise UserError(f"{target}: doctor takes a model directory or an A/B config (.yaml), "
                        "not this file.")
    return DoctorReport(source=target, findings=diagnose_model(target))
