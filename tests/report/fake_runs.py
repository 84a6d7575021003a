"""Run directories for the report tests, made by the real pipeline from hand-built samples.

Only the samples are fake: two tiny `ArmSamples` stand in for what lm-eval would have
logged, then `evals.pipelines.finish.finish` pairs, analyses, decides and writes the run
directory exactly as a real run does (including calling `write_reports`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from evals.pipelines.finish import finish
from evals.plan.config import GateConfig, TaskSpec
from evals.pair.samples import ArmSamples, SampleRecord

XSS_RESPONSE = "<script>window.__pwned=1</script><b>bold</b> **md**"
XSS_PROMPT = 'Question: <img src=x onerror="window.__pwned=2"> What is 6 * 7?\nAnswer:'
ODD_TASK = "edge|<i>name</i>`x`"


def _hash(*parts) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def record(task: str, doc_id: int, metric: str, score: float, *, target: str, prediction: str,
           response: str, prompt: str = "", choices: tuple[str, ...] = (),
           choice_logliks: tuple[float, ...] = ()) -> SampleRecord:
    prompt = prompt or f"Question {doc_id} of {task}?\nAnswer:"
    return SampleRecord(task=task, doc_id=doc_id, filter="none", metrics={metric: float(score)},
                        doc_hash=_hash(task, doc_id), prompt_hash=_hash(prompt), target=target,
                        prediction=prediction, response=response, prompt=prompt,
                        choices=choices, choice_logliks=choice_logliks)


def _generative(task: str, n: int, correct_b: set[int], correct_c: set[int]):
    arms = {"baseline": [], "candidate": []}
    for i in range(n):
        target = str(10 + i)
        for arm, correct in (("baseline", correct_b), ("candidate", correct_c)):
            answer = target if i in correct else str(1000 + i)
            response = f"Let me think step by step. {i} plus 10 is {answer}. " \
                       f"The answer is {answer}."
            prompt = ""
            if i == 0:
                prompt = XSS_PROMPT
                if arm == "candidate":
                    response = XSS_RESPONSE
            arms[arm].append(record(task, i, "exact_match", float(i in correct), target=target,
                                    prediction=answer, response=response, prompt=prompt))
    return arms


def _multiple_choice(task: str, n: int, flips_down: set[int], flips_up: set[int]):
    choices = ("no", "yes")
    arms = {"baseline": [], "candidate": []}
    for i in range(n):
        target = choices[i % 2]
        base_right = i % 5 != 0  # 80 % baseline accuracy
        cand_right = (base_right and i not in flips_down) or (not base_right and i in flips_up)
        for arm, right in (("baseline", base_right), ("candidate", cand_right)):
            pred = target if right else choices[1 - i % 2]
            # the predicted choice scores higher; the candidate's margins are a little apart
            gap = 0.05 + (i % 7) / 10 + (0.02 if arm == "candidate" else 0.0)
            logliks = tuple(-1.0 if c == pred else -1.0 - gap for c in choices)
            arms[arm].append(record(task, i, "acc", float(right), target=target, prediction=pred,
                                    response=pred, choices=choices, choice_logliks=logliks))
    return arms


def _continuous(task: str, n: int):
    arms = {"baseline": [], "candidate": []}
    for i in range(n):
        base = (i % 7) / 7
        cand = base + (0.1 if i % 5 == 0 else -0.05 if i % 4 == 0 else 0.0)
        for arm, score in (("baseline", base), ("candidate", min(max(cand, 0.0), 1.0))):
            arms[arm].append(record(task, i, "f1", score, target=f"span {i}",
                                    prediction=f"span {i} ({arm})",
                                    response=f"The span is {i} | `{arm}` <em>x</em>"))
    return arms


def _manifest(arm: str, tasks: dict[str, int], speedup: float) -> dict:
    candidate = arm == "candidate"
    effective = {
        "cache.block_size": 16, "cache.enable_prefix_caching": candidate,
        "model.dtype": "bfloat16", "model.max_model_len": 4096,
        "scheduler.max_num_seqs": 256, "speculative.method": "mtp" if candidate else None,
        "speculative.num_speculative_tokens": 1 if candidate else None,
        "parallel.tensor_parallel_size": 1, "load.load_format": "auto",
    }
    return {
        "schema_version": 1, "arm": arm, "effective_engine_config": effective,
        "requested_engine_args": {"enable_prefix_caching": True,
                                  "speculative_config": {"method": "mtp",
                                                         "num_speculative_tokens": 1}}
        if candidate else {"enable_prefix_caching": False},
        "versions": {"vllm": "0.11.0", "lm-eval": "0.4.13", "torch": "2.8.0",
                     "python": "3.12.3"},
        "model": "/models/tiny-mtp", "model_hash": "0123456789abcdef",
        "engine_start_seconds": 41.5 if candidate else 38.2,
        "generation": {"generated_tokens": 12000, "requests": 130,
                       "finish_reasons": {"stop": 120, "length": 10}},
        "spec_decode": {"vllm:spec_decode_num_accepted_tokens": 800.0,
                        "vllm:spec_decode_num_draft_tokens": 1100.0} if candidate else {},
        "tasks": {task: {"task": task, "key": "k", "wall_seconds": 100.0 / (speedup if candidate
                                                                            else 1.0),
                         "generated_tokens": 100 * n, "requests": n, "n_samples": {task: n},
                         "task_hashes": {task: "abc"}} for task, n in tasks.items()},
    }


def _finish(run_dir: Path, kind: str, specs: list[TaskSpec], arms: dict[str, list],
            manifests: dict[str, dict], margin: float = 0.05) -> Path:
    samples = {name: ArmSamples(source=f"/runs/{name}/lm_eval", records=tuple(records),
                                task_hashes={s.name: f"hash-{s.name}" for s in specs})
               for name, records in arms.items()}
    finish(kind=kind, run_dir=run_dir, tasks=specs,
           gate=GateConfig(alpha=0.05, margin=margin, bootstrap_resamples=200), seed=1234,
           config_dump={"name": run_dir.name, "seed": 1234,
                        "gate": {"alpha": 0.05, "margin": margin, "correction": "holm",
                                 "bootstrap_resamples": 200}},
           samples=samples, manifests=manifests, echo=lambda *args: None)
    return run_dir


def regression_run(run_dir: Path) -> Path:
    """An A/B run: a generative task that regresses (with the XSS item), an inconclusive
    multiple-choice task, and a non-gated continuous task with an awkward name."""
    gen = _generative("gsm8k_tiny", 60, set(range(45)), (set(range(45)) - set(range(12))) | {50})
    mc = _multiple_choice("boolq_tiny", 40, flips_down={1, 2}, flips_up={5, 10, 15})
    odd = _continuous(ODD_TASK, 30)
    arms = {a: gen[a] + mc[a] + odd[a] for a in ("baseline", "candidate")}
    specs = [TaskSpec(name="gsm8k_tiny", metric="exact_match"),
             TaskSpec(name="boolq_tiny", metric="acc"),
             TaskSpec(name=ODD_TASK, metric="f1", gate=False)]
    counts = {"gsm8k_tiny": 60, "boolq_tiny": 40, ODD_TASK: 30}
    manifests = {a: _manifest(a, counts, speedup=1.6) for a in ("baseline", "candidate")}
    return _finish(run_dir, "ab", specs, arms, manifests)


def passing_compare_run(run_dir: Path) -> Path:
    """A compare run (manifests hold only source and lm-eval config) that passes."""
    n = 400
    keep = set(range(0, n, 2))
    arms = _generative("arc_tiny", n, keep, (keep - {0, 2}) | {1, 3, 5})
    manifests = {a: {"source": f"/runs/{a}",
                     "lm_eval_config": {"model": "vllm", "model_args": f"pretrained=x,arm={a}",
                                        "batch_size": "auto"}}
                 for a in ("baseline", "candidate")}
    return _finish(run_dir, "compare", [TaskSpec(name="arc_tiny", metric="exact_match")],
                   arms, manifests)


def many_flips_run(run_dir: Path, n_items: int = 12_000, n_flipped: int = 10_000,
                   response_chars: int = 600) -> Path:
    """A run whose two tasks together have `n_flipped` flipped items with long-ish texts."""
    arms: dict[str, list] = {"baseline": [], "candidate": []}
    filler = ("The quick brown fox jumps over the lazy dog; <tag> & so on. " * 40)
    for task_index, task in enumerate(("long_a", "long_b")):
        half, flipped_half = n_items // 2, n_flipped // 2
        for i in range(half):
            flipped = i < flipped_half
            base_right = i % 3 != 0 if flipped else True
            cand_right = (not base_right) if flipped else True
            for arm, right in (("baseline", base_right), ("candidate", cand_right)):
                answer = "42" if right else f"{i}"
                response = (filler[(i + len(arm)) % 50:][:response_chars]
                            + f" so the answer is {answer}.")
                arms[arm].append(record(task, i, "exact_match", float(right), target="42",
                                        prediction=answer, response=response,
                                        prompt=filler[:800] + f" item {task_index}-{i}?"))
    specs = [TaskSpec(name="long_a", metric="exact_match"),
             TaskSpec(name="long_b", metric="exact_match")]
    manifests = {a: _manifest(a, {"long_a": n_items // 2, "long_b": n_items // 2}, 1.2)
                 for a in ("baseline", "candidate")}
    return _finish(run_dir, "ab", specs, arms, manifests)
