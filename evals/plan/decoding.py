"""How the arms prompt and sample the model: the chat template, the decoding settings and
the repeats per item (issue 53), validated before any engine starts.

`chat:` and `decoding:` are set once for the run; an arm may override a decoding setting
only where `intended_change` lists it as `decoding.<setting>` (a sampled speculative
decoder tested at another temperature than its baseline is a different comparison).
`repeats: k` runs every generation item k times; with sampling, repeat r of an item gets
the same per-request seed in both arms (evals.runner.sample_seeds).

Pure: no vLLM or lm-eval import (a bad config exits before either loads).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from evals.errors import UserError

DECODING_PREFIX = "decoding."
"""How `intended_change` names a decoding setting: `decoding.temperature`."""


class ChatConfig(BaseModel):
    """`chat:` - every prompt goes through a chat template, as a served chat model's do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: bool | str = Field(
        True, description="true: the model's own chat template (its tokenizer_config.json or "
        "chat_template.jinja); a path (relative to the config file): a Jinja chat template "
        "file used instead")
    system: str | None = Field(None, description="the system prompt every request shares")
    fewshot_as_multiturn: bool = Field(
        False, description="few-shot examples as alternating user/assistant turns instead of "
        "one user message")


class DecodingConfig(BaseModel):
    """`decoding:` - the sampling settings of every generation request (vLLM's
    SamplingParams); unset fields keep the task's own (greedy for the bundled tasks)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(None, ge=0, le=10, description="0: greedy")
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling mass")
    top_k: int | None = Field(None, ge=-1, description="-1 or 0: all tokens")
    min_p: float | None = Field(None, ge=0, le=1, description="minimum probability relative "
                                "to the most likely token")
    max_tokens: int | None = Field(None, ge=1, le=1_000_000, description="generated tokens "
                                   "per request at most (the task's max_gen_toks otherwise)")
    seed_each_request: bool | None = Field(
        None, description="true (default): each sampled request gets its own seed from the "
        "run seed, the item and the repeat, the same in both arms (samples paired one to "
        "one); false: the engine's own random stream, as a server without request seeds "
        "samples (vLLM runs another code path for seeded requests)")


DECODING_FIELDS = tuple(DecodingConfig.model_fields)


def effective_decoding(run: DecodingConfig | None, arm: DecodingConfig | None) -> dict:
    """The run's decoding settings with the arm's overrides on top; unset ones left out."""
    merged = {}
    for part in (run, arm):
        if part is not None:
            merged.update(part.model_dump(exclude_none=True))
    return merged


def samples(decoding: dict) -> bool:
    """Whether these settings sample (a temperature above 0) rather than decode greedily."""
    return float(decoding.get("temperature") or 0) > 0


def seeds_each_request(decoding: dict) -> bool:
    """Whether sampled requests get per-request seeds (`seed_each_request`, default on)."""
    return decoding.get("seed_each_request") is not False


def gen_kwargs(decoding: dict) -> dict:
    """lm-eval's `gen_kwargs` for these settings (they update each task's own): lm-eval
    forces temperature 0 unless `do_sample` is true, and names max_tokens `max_gen_toks`."""
    out = {k: v for k, v in decoding.items() if k not in ("max_tokens", "seed_each_request")}
    if "max_tokens" in decoding:
        out["max_gen_toks"] = decoding["max_tokens"]
    if "temperature" in decoding:
        out["do_sample"] = samples(decoding)
    return out


def check_decoding_overrides(config, source) -> None:
    """An arm's decoding setting that makes the arms differ must be listed in
    `intended_change` as `decoding.<setting>`; otherwise exit 2 naming it."""
    runs = {arm: effective_decoding(config.decoding, config.arm(arm).decoding)
            for arm in ("baseline", "candidate")}
    listed = set(config.intended_change or ())
    for name in DECODING_FIELDS:
        b, c = (runs[arm].get(name) for arm in ("baseline", "candidate"))
        if b != c and DECODING_PREFIX + name not in listed:
            raise UserError(
                f"{source}: the arms differ in decoding setting `{name}` ({b} vs {c}), which "
                f"`intended_change` does not list; add `{DECODING_PREFIX}{name}` to it if "
                "the difference is meant, or set it under the top-level `decoding:` only.")


def check_serving_modes(config, source) -> None:
    """Chat templates, decoding settings and repeats run through lm-eval's vLLM backend;
    the completions backend of server and endpoint arms does not get them (yet)."""
    if config.chat is None and config.decoding is None and config.repeats == 1 and not any(
            config.arm(a).decoding for a in ("baseline", "candidate")):
        return
    for arm in ("baseline", "candidate"):
        mode = config.arm(arm).mode
        if mode != "offline":
            raise UserError(
                f"{source}: `chat`, `decoding` and `repeats` need offline arms for now (lm-eval's "
                f"vLLM backend with per-request seeds); arm {arm} has mode `{mode}`. Run it "
                "offline, or drop those settings.")
    if config.repeats > 1 and config.sequential is not None:
        raise UserError(f"{source}: `repeats` and `sequential` cannot be combined (an "
                        "interim look would split an item's repeats).")
    if config.repeats > 1 and any(config.arm(a).cache_stress for a in ("baseline", "candidate")):
        raise UserError(f"{source}: `repeats` and an arm's `cache_stress` cannot be combined.")


def repeats_warnings(config) -> list[str]:
    """`repeats > 1` with greedy decoding is allowed (it averages the engine's own
    nondeterminism), but on a deterministic engine every repeat is the same answer."""
    if config.repeats <= 1:
        return []
    greedy = [arm for arm in ("baseline", "candidate")
              if not samples(effective_decoding(config.decoding, config.arm(arm).decoding))]
    if not greedy:
        return []
    return [f"`repeats: {config.repeats}` with greedy decoding (arm {', '.join(greedy)}: no "
            "temperature above 0): on a deterministic engine the repeats are identical, and "
            "they only average the engine's own nondeterminism"]


def resolve_template(chat: ChatConfig | None, base_dir: Path) -> ChatConfig | None:
    """A template path made absolute against the config file's folder."""
    if chat is None or isinstance(chat.template, bool):
        return chat
    path = Path(chat.template).expanduser()
    path = path if path.is_absolute() else (base_dir / path)
    return chat.model_copy(update={"template": str(path.resolve())})


def model_has_chat_template(model: str) -> bool | None:
    """Whether a local model folder carries a chat template (tokenizer_config.json's
    `chat_template` or a chat_template.jinja / .json file); None for a hub id (not looked up)."""
    folder = Path(model)
    if not folder.is_dir():
        return None
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    config = folder / "tokenizer_config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(isinstance(data, dict) and data.get("chat_template"))


def check_chat_template(config) -> None:
    """`chat.template: true` needs the model's own template; a template path must be a
    readable text file. Exit 2 naming the model path or the file."""
    chat = config.chat
    if chat is None or chat.template is False:
        return
    if isinstance(chat.template, str):
        path = Path(chat.template)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise UserError(f"{config.source}: `chat.template` file {path} cannot be read "
                            "(missing or not UTF-8 text).") from None
        if not text.strip():
            raise UserError(f"{config.source}: `chat.template` file {path} is empty.")
        return
    for arm in ("baseline", "candidate"):
        model = config.arm_model(arm)
        if model_has_chat_template(model) is False:
            raise UserError(
                f"{config.source}: `chat.template: true`, but model {model} (arm {arm}) has no "
                "chat template (none in tokenizer_config.json, no chat_template.jinja); give "
                "`chat.template` a Jinja template file.")


def arm_sampling(config, arm: str) -> dict | None:
    """What the worker needs to prompt and sample like the config says (ArmSpec.sampling),
    the template's text included so the arm's key changes with it; None when nothing is set
    (the arm keeps its old key)."""
    decoding = effective_decoding(config.decoding, config.arm(arm).decoding)
    chat = config.chat
    if chat is None and not decoding and config.repeats == 1:
        return None
    out: dict = {"decoding": decoding, "repeats": config.repeats, "seed": config.seed}
    if chat is not None:
        template = chat.template
        out["chat"] = {
            "template": (template if isinstance(template, bool)
                         else Path(template).read_text(encoding="utf-8")),
            "template_path": None if isinstance(template, bool) else template,
            "system": chat.system, "fewshot_as_multiturn": chat.fewshot_as_multiturn}
    return out
