"""The config audit: do the arms differ only in what the config says they should?

Before any item runs, both arms' effective engine configs (what vLLM will use, defaults it
fills in included) are resolved by the runner (`evals.runner.config_resolver`, in a subprocess)
and compared here. A difference the config did not declare stops the run:

1. with `intended_change` set, any engine argument, `model`, `env` or `mode` the arms set
   differently that it does not list (an MTP speed comparison whose other server flags were
   not aligned);
2. always, an effective-config field that changed although its engine argument was neither
   set differently by the arms nor declared (a "disable MTP" switch that silently disabled
   prefix caching too): vLLM changed it on its own.

`--allow-undeclared-diff` overrides the stop; the result records that it did. If a config
cannot be resolved on this machine (a GPU-only config on CPU), only the engine arguments
are audited, with a note saying so.

`audit_arms` is pure (effective configs in, `AuditResult` out); `run_audit` resolves and audits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from evals.plan.config import ABConfig
from evals.plan.arm_env import arm_env
from evals.plan.decoding import DECODING_FIELDS, DECODING_PREFIX, effective_decoding
from evals.errors import UserError
from evals.paths import ARMS

# intended_change names that are not engine arguments
PSEUDO_NAMES = ("model", "env", "mode", "lora_adapter")
OVERRIDE_FLAG = "--allow-undeclared-diff"
NOT_SET = "<not set>"

# Effective fields vLLM derives from another argument, by field name. A change in them is
# explained when that argument is declared or differs. Sources (vLLM 0.32): VllmConfig.
# _set_max_num_scheduled_tokens (speculative decoding fills max_num_scheduled_tokens in);
# ModelConfig (tokenizer, served name, max length, dtype "auto" and quantization follow the
# checkpoint); the CPU platform sizes the KV cache from VLLM_CPU_KVCACHE_SPACE; batch limits
# default by usage context (EngineArgs.get_batch_defaults: `vllm serve` vs vllm.LLM = mode).
DERIVED_FROM: dict[str, tuple[str, ...]] = {
    "max_num_scheduled_tokens": ("speculative_config",),
    "max_num_batched_tokens": ("mode",),
    "max_num_seqs": ("mode",),
    "tokenizer": ("model",),
    "served_model_name": ("model", "mode"),
    "max_model_len": ("model",),
    "dtype": ("model",),
    "quantization": ("model",),
    "kv_cache_memory_bytes": ("env",),
}
# effective fields named differently from the engine argument that sets them
FIELD_ARGUMENT = {"cache.cache_dtype": "kv_cache_dtype", "scheduler.policy": "scheduling_policy"}
# flattened sub-configs that exist or change because of these engine arguments
SECTION_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "speculative": ("speculative_config", "spec_method", "spec_model", "spec_tokens"),
    "quant": ("quantization", "quantization_config", "model"),
    "lora": ("enable_lora", "lora_adapter"),  # an adapter turns LoRA on (engine_call)
    "compilation": ("compilation_config", "enforce_eager", "optimization_level",
                    "performance_mode"),
    "kv_transfer": ("kv_transfer_config",),
    "structured_outputs": ("structured_outputs_config",),
}


@dataclass(frozen=True, slots=True)
class Difference:
    """One field whose value differs between the arms."""

    field: str  # `engine.NAME`, `model`, `env.NAME`, or a flattened effective key
    baseline: Any
    candidate: Any
    status: str  # declared | requested | follows ARG | NOT DECLARED | "" (not an engine argument)


@dataclass(frozen=True, slots=True)
class Undeclared:
    """An engine argument (or `model` / `env`) the arms differ in without the config saying so."""

    name: str
    fields: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class AuditResult:
    """What the arms differ in, requested and effective, and what the config did not declare."""

    source: str
    intended_change: tuple[str, ...] | None
    requested: tuple[Difference, ...]
    effective: tuple[Difference, ...]
    resolved: bool  # both arms' effective configs were resolved (else: arguments only)
    undeclared: tuple[Undeclared, ...]
    unknown_declared: tuple[str, ...]  # intended_change names vLLM does not know
    notes: tuple[str, ...]
    seconds: tuple[tuple[str, float], ...] = ()  # (arm, seconds to resolve)
    resolved_in: tuple[tuple[str, str], ...] = ()  # (arm, which process resolved it)
    allow_undeclared: bool = False

    @property
    def stops(self) -> bool:
        return bool(self.unknown_declared) or (bool(self.undeclared) and not self.allow_undeclared)

    def with_override(self, allow: bool = True) -> AuditResult:
        return replace(self, allow_undeclared=allow)

    def stop_message(self) -> str:
        """One paragraph naming the config file, the undeclared fields and the override."""
        if self.unknown_declared:
            names = ", ".join(f"`{n}`" for n in self.unknown_declared)
            return (f"{self.source}: `intended_change` lists {names}, which is not a vLLM engine "
                    f"argument (nor `model`, `env` or `mode`); spell it as vLLM's engine argument.")
        if not self.undeclared:
            return ""
        what = "; ".join(f"{u.name} ({u.reason})" for u in self.undeclared)
        listed = ("`intended_change` does not list" if self.intended_change is not None
                  else "the config does not ask for")
        return (f"{self.source}: the arms differ in what {listed}: {what}. Add them to "
                f"`intended_change` if they are meant, align the arms if not, or rerun with "
                f"{OVERRIDE_FLAG} to compare anyway (recorded in the report).")

    def check(self) -> None:
        """Raises UserError with `stop_message()` when the audit stops the run."""
        if self.stops:
            raise UserError(self.stop_message())

    def message(self) -> str:
        """The readable diff tables, notes, and the stop (or override) message."""
        declared = ("not set: every engine argument the arms set differently"
                    if self.intended_change is None else ", ".join(self.intended_change) or "nothing")
        lines = [f"config audit of {self.source} (intended change: {declared})"]
        lines += _table("requested differences (config)", self.requested)
        if self.resolved:
            lines += _table("effective differences (as vLLM resolves them, defaults included)",
                            self.effective)
        lines += [f"  note: {note}" for note in self.notes]
        if self.stops:
            lines.append("STOP: " + self.stop_message())
        elif self.undeclared:
            lines.append(f"undeclared differences allowed by {OVERRIDE_FLAG}: "
                         + ", ".join(u.name for u in self.undeclared))
        return "\n".join(lines)

    def warning_lines(self) -> list[str]:
        """Short lines for summary.json `warnings`: undeclared differences and notes."""
        lines = [f"config audit: undeclared difference in {u.name} ({u.reason})"
                 + (f", allowed by {OVERRIDE_FLAG}" if self.allow_undeclared else "")
                 for u in self.undeclared]
        return lines + [f"config audit: {note}" for note in self.notes]

    def to_dict(self) -> dict:
        def rows(diffs):
            return [{"field": d.field, "baseline": d.baseline, "candidate": d.candidate,
                     "status": d.status} for d in diffs]

        return {
            "source": self.source,
            "intended_change": None if self.intended_change is None else list(self.intended_change),
            "resolved": self.resolved,
            "requested": rows(self.requested),
            "effective": rows(self.effective),
            "undeclared": [{"name": u.name, "fields": list(u.fields), "reason": u.reason}
                           for u in self.undeclared],
            "unknown_declared": list(self.unknown_declared),
            "notes": list(self.notes),
            "seconds": dict(self.seconds),
            "resolved_in": dict(self.resolved_in),
            "allow_undeclared": self.allow_undeclared,
            "stopped": self.stops,
        }


def _short(value: Any, width: int = 48) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, dict) and len(value) > 4:
        text = f"{{{len(value)} fields}} " + text
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(title: str, diffs: tuple[Difference, ...]) -> list[str]:
    if not diffs:
        return [f"{title}: none"]
    rows = [("field", "baseline", "candidate", "status")]
    rows += [(d.field, _short(d.baseline), _short(d.candidate), d.status) for d in diffs]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    out = [f"{title}:"]
    for i, row in enumerate(rows):
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def _requested(config: ABConfig) -> tuple[list[tuple[str, str, Any, Any]], set[str]]:
    """(name, field, baseline, candidate) for every requested difference; the differing names."""
    base, cand = config.arm("baseline"), config.arm("candidate")
    out = []
    for key in sorted(set(base.engine) | set(cand.engine)):
        b, c = base.engine.get(key, NOT_SET), cand.engine.get(key, NOT_SET)
        if b != c:
            out.append((key, f"engine.{key}", b, c))
    if config.arm_model("baseline") != config.arm_model("candidate"):
        out.append(("model", "model", config.arm_model("baseline"), config.arm_model("candidate")))
    modes = [getattr(arm, "mode", "offline") for arm in (base, cand)]  # offline | server | ...
    if modes[0] != modes[1]:
        out.append(("mode", "mode", modes[0], modes[1]))
    if base.lora_adapter != cand.lora_adapter:
        out.append(("lora_adapter", "lora_adapter", base.lora_adapter or NOT_SET,
                    cand.lora_adapter or NOT_SET))
    envs = [arm_env(config, arm).recorded for arm in ARMS]  # secrets as markers
    for key in sorted(set(envs[0]) | set(envs[1])):
        b, c = envs[0].get(key, NOT_SET), envs[1].get(key, NOT_SET)
        if b != c:
            out.append(("env", f"env.{key}", b, c))
    decoding = [effective_decoding(config.decoding, arm.decoding) for arm in (base, cand)]
    for key in DECODING_FIELDS:
        b, c = decoding[0].get(key, NOT_SET), decoding[1].get(key, NOT_SET)
        if b != c:  # the config already refused one `intended_change` does not list
            out.append((DECODING_PREFIX + key, DECODING_PREFIX + key, b, c))
    return out, {name for name, *_ in out}


def _collapse(b: dict, c: dict) -> list[tuple[str, Any, Any]]:
    """(field, baseline, candidate) per effective difference. A sub-config that is None in one
    arm and filled in in the other is one row, holding the filled-in fields as a mapping."""
    rows: dict[str, tuple[Any, Any]] = {}
    for key in sorted(set(b) | set(c)):
        vb, vc = b.get(key, NOT_SET), c.get(key, NOT_SET)
        if vb == vc:
            continue
        if key in b and key in c:
            rows[key] = (vb, vc)
            continue
        present, missing_in = (c, b) if vb is NOT_SET else (b, c)
        parts = key.split(".")
        prefix = next((".".join(parts[:i]) for i in range(1, len(parts))
                       if missing_in.get(".".join(parts[:i]), NOT_SET) is None), None)
        if prefix is None:
            rows[key] = (vb, vc)
            continue
        sub = {k[len(prefix) + 1:]: v for k, v in present.items() if k.startswith(prefix + ".")}
        rows[prefix] = (None, sub) if present is c else (sub, None)
    return [(field, vb, vc) for field, (vb, vc) in sorted(rows.items())]


def _argument(key: str, arg_names: set[str]) -> str | None:
    """The engine argument an effective key stands for, if any."""
    leaf = key.rsplit(".", 1)[-1]
    return FIELD_ARGUMENT.get(key) or (leaf if leaf in arg_names else None)


def _causes(key: str, arg_names: set[str]) -> set[str]:
    """Every engine argument (or `model` / `env`) that can explain a change in this key."""
    causes = set(DERIVED_FROM.get(key.rsplit(".", 1)[-1], ()))
    causes |= set(SECTION_ARGUMENTS.get(key.split(".")[0], ()))
    argument = _argument(key, arg_names)
    return causes | {argument} if argument else causes


def _undeclared_requested(requested, intended: tuple[str, ...]) -> dict[str, Undeclared]:
    grouped: dict[str, list[tuple[str, Any, Any]]] = {}
    for name, field, b, c in requested:
        if name not in intended:
            grouped.setdefault(name, []).append((field, b, c))
    return {name: Undeclared(name, tuple(f for f, _, _ in rows), "set differently: " + "; ".join(
        f"{f} {_short(b, 30)} vs {_short(c, 30)}" for f, b, c in rows))
        for name, rows in grouped.items()}


def _effective_rows(base: dict, cand: dict, arg_names: set[str], allowed: set[str],
                    intended: tuple[str, ...] | None, undeclared: dict[str, Undeclared]
                    ) -> tuple[list[Difference], set[str]]:
    """Rows of the effective differences, and the names they are attributed to. Rule 2 adds
    to `undeclared`: vLLM changed an engine-argument field (or a whole sub-config) that no
    requested or declared difference explains."""
    rows, explained = [], set()
    for field, b, c in _collapse(base, cand):
        argument, cause = _argument(field, arg_names), _causes(field, arg_names) & allowed
        if argument is None and field in SECTION_ARGUMENTS:  # a whole sub-config
            argument = next((a for a in SECTION_ARGUMENTS[field] if a in cause), None)
        explained |= cause
        if cause and intended is not None and not cause & set(intended):
            status = "NOT DECLARED"  # explained only by a requested difference rule 1 flags
        elif cause:
            status = ("follows " + ", ".join(sorted(cause)) if argument not in cause
                      else "declared" if intended is not None else "requested")
        elif argument or field in SECTION_ARGUMENTS:
            name = argument or SECTION_ARGUMENTS[field][0]
            prior = undeclared[name].fields if name in undeclared else ()
            undeclared[name] = Undeclared(
                name, prior + (field,), f"vLLM resolves {field} to {_short(b, 30)} vs "
                f"{_short(c, 30)} although the arms do not set {name} differently")
            status = "NOT DECLARED"
        else:
            status = ""  # not an engine argument: shown, not audited
        rows.append(Difference(field, b, c, status))
    return rows, explained


def _notes(requested, intended, differing: set[str], explained: set[str], unknown,
           base: dict | None, arg_names: set[str], vllm_warnings) -> list[str]:
    notes = []
    for name, field, _, _ in requested if base is not None else ():
        same = [k for k in base if name in arg_names and _argument(k, arg_names) == name]
        if same and name not in explained:
            notes.append(f"the arms set {field} differently, but vLLM resolves {same[0]} to "
                         f"{_short(base[same[0]], 30)} in both: it ignores or overrides the "
                         "difference here")
    for name in intended or ():
        if name not in differing and name not in explained and name not in unknown:
            notes.append(f"`intended_change` lists {name}, but the arms do not differ in it")
    if vllm_warnings:
        base_w, cand_w = (list(vllm_warnings.get(arm, ())) for arm in ARMS)
        notes += [f"vLLM warned for the candidate only: {w}" for w in cand_w if w not in base_w]
        notes += [f"vLLM warned for the baseline only: {w}" for w in base_w if w not in cand_w]
    return notes


def audit_arms(config: ABConfig, effective: Mapping[str, dict | None], *,
               engine_arg_names: Iterable[str] = (), errors: Mapping[str, str] | None = None,
               vllm_warnings: Mapping[str, Iterable[str]] | None = None,
               seconds: Mapping[str, float] | None = None,
               resolved_in: Mapping[str, str] | None = None,
               allow_undeclared: bool = False) -> AuditResult:
    """Compares the arms' requested and effective configs against `intended_change`.

    `effective` maps each arm to its flattened effective engine config (None: not resolved,
    `errors` says why); `engine_arg_names` are vLLM's engine-argument names, from the runner.
    """
    arg_names = set(engine_arg_names)
    intended = None if config.intended_change is None else tuple(config.intended_change)
    requested, differing = _requested(config)
    unknown = tuple(n for n in intended or () if arg_names and n not in arg_names
                    and n not in PSEUDO_NAMES and not n.startswith(DECODING_PREFIX))
    # rule 1: with intended_change set, every requested difference must be listed
    undeclared = _undeclared_requested(requested, intended) if intended is not None else {}
    resolved = all(effective.get(arm) is not None for arm in ARMS)
    rows, explained, fallback = [], set(), []
    if resolved:
        rows, explained = _effective_rows(effective["baseline"], effective["candidate"],
                                          arg_names, differing | set(intended or ()),
                                          intended, undeclared)
    else:
        fallback = [f"the effective engine config of arm {arm} could not be resolved "
                    f"({(errors or {}).get(arm, 'no result')}); only the engine arguments "
                    "were audited" for arm in ARMS if effective.get(arm) is None]
    notes = fallback + _notes(requested, intended, differing, explained, unknown,
                              effective["baseline"] if resolved else None, arg_names,
                              vllm_warnings)
    requested_rows = tuple(
        Difference(field, b, c, "requested" if intended is None
                   else "declared" if name in intended else "NOT DECLARED")
        for name, field, b, c in requested)
    return AuditResult(
        source=config.source, intended_change=intended, requested=requested_rows,
        effective=tuple(rows), resolved=resolved,
        undeclared=tuple(undeclared[k] for k in sorted(undeclared)),
        unknown_declared=unknown, notes=tuple(notes),
        seconds=tuple(sorted((seconds or {}).items())),
        resolved_in=tuple(sorted((resolved_in or {}).items())),
        allow_undeclared=allow_undeclared)


def arm_inputs(config: ABConfig) -> dict:
    """Minimal `ArmSpec`s of both arms: the resolver needs model, engine, env, seed, mode and
    adapter."""
    from evals.plan.arm_spec import ArmSpec

    envs = {arm: arm_env(config, arm) for arm in ARMS}
    return {arm: ArmSpec(arm=arm, model=config.arm_model(arm), engine=dict(config.arm(arm).engine),
                         env=envs[arm].recorded, secret_env=envs[arm].secrets, tasks=(),
                         limit=None, num_fewshot=None,
                         seed=config.seed, include_paths=(), output_dir="", versions={},
                         mode=config.arm(arm).mode, lora_adapter=config.arm(arm).lora_adapter)
            for arm in ARMS}


def run_audit(config: ABConfig, specs: Mapping | None = None, *, allow_undeclared: bool = False,
              timeout: float | None = None) -> AuditResult:
    """Resolves both arms' effective engine configs (one subprocess per arm, each with the
    arm's worker environment; no engine starts) and audits them. Call before any arm runs;
    `result.check()` raises the stop as a UserError, `result.message()` is the printout.

    `specs` maps arm names to their `ArmSpec` (extra arms such as a baseline rerun are
    ignored); by default they are built from the config.
    """
    from evals.runner.config_resolver import DEFAULT_TIMEOUT, resolve_arms

    specs = specs or arm_inputs(config)
    resolved = resolve_arms({arm: specs[arm] for arm in ARMS},
                            timeout=timeout or DEFAULT_TIMEOUT)
    return audit_resolved(config, resolved, allow_undeclared=allow_undeclared)


def audit_resolved(config: ABConfig, resolved: Mapping, *, allow_undeclared: bool = False
                   ) -> AuditResult:
    """`audit_arms` over the runner's `ResolvedArm` results (see `resolve_arms`)."""
    names = next((r.engine_arg_names for r in resolved.values() if r.engine_arg_names), ())
    return audit_arms(
        config, {arm: r.effective for arm, r in resolved.items()}, engine_arg_names=names,
        errors={arm: r.error for arm, r in resolved.items() if r.error},
        vllm_warnings={arm: r.vllm_warnings for arm, r in resolved.items()},
        seconds={arm: r.seconds for arm, r in resolved.items()},
        resolved_in={arm: r.resolved_in for arm, r in resolved.items()},
        allow_undeclared=allow_undeclared)
