"""How an arm's requests are prompted and sampled, as lm-eval's `simple_evaluate` and
its vLLM backend take it (issue 53): the chat template, the system prompt, few-shot turns
and the decoding settings of `ArmSpec.sampling` (evals.plan.decoding.arm_sampling)."""

from __future__ import annotations

from evals.plan.decoding import gen_kwargs, seeds_each_request


def prompt_settings(sampling: dict | None) -> dict:
    """Keyword arguments of `simple_evaluate` for these settings; {} for none, so an arm
    without them runs exactly as before."""
    if not sampling:
        return {}
    out: dict = {}
    chat = sampling.get("chat")
    if chat is not None:
        out["apply_chat_template"] = chat["template"] is not False
        out["fewshot_as_multiturn"] = bool(chat["fewshot_as_multiturn"]
                                           and chat["template"] is not False)
        if chat.get("system"):
            out["system_instruction"] = chat["system"]
    else:
        out["fewshot_as_multiturn"] = False  # lm-eval's default (True) needs a template
    kwargs = gen_kwargs(sampling.get("decoding") or {})
    if kwargs:
        out["gen_kwargs"] = kwargs
    return out


def sampled_with_seeds(sampling: dict | None) -> bool:
    """Whether the arm's sampled requests carry per-request seeds (evals.runner.sample_seeds;
    greedy requests never do)."""
    return bool(sampling) and seeds_each_request((sampling or {}).get("decoding") or {})


def use_template_text(lm, sampling: dict | None) -> str | None:
    """A template given as a file (`chat.template: PATH`) replaces the model's own in the
    lm-eval backend: both where it renders prompts and where it names the template in its
    results. Returns the text used, or None where the model's own (or none) is used."""
    chat = (sampling or {}).get("chat") or {}
    text = chat.get("template")
    if not isinstance(text, str):
        return None
    lm.hf_chat_template = text
    lm.tokenizer.chat_template = text
    return text


def sampling_record(sampling: dict | None) -> dict | None:
    """The arm's effective prompting and decoding settings for its manifest and the report:
    the template named by its file (or the model's own) and the hash of its text."""
    if not sampling:
        return None
    import hashlib

    out = {"decoding": dict(sampling.get("decoding") or {}),
           "repeats": int(sampling.get("repeats", 1)),
           "per_request_seeds": sampled_with_seeds(sampling)}
    chat = sampling.get("chat")
    if chat is not None:
        template = chat["template"]
        out["chat"] = {
            "template": (chat.get("template_path") if isinstance(template, str)
                         else "the model's own" if template else "none"),
            "template_sha256": (hashlib.sha256(template.encode()).hexdigest()[:16]
                                if isinstance(template, str) else None),
            "system": chat.get("system"),
            "fewshot_as_multiturn": bool(chat.get("fewshot_as_multiturn"))}
    return out
