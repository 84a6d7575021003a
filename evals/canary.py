"""`python -m evals canary CONFIG`: does the gate catch faults modeled on real vLLM bugs?

Runs the config once as an ordinary A/B (baseline, reused from the run store when it can
be, and the clean candidate), then once more per canary fault that applies to what the
candidate enables, with the fault injected into the candidate's engine only
(evals.faults). Each run goes through the ordinary runner and gate. A harmful fault must
give REGRESSION, a benign one must not. Written to `<reports>/canary-<run id>/`:
`canary.json` and `canary.html`.

For each fault the smallest rate the config's tasks and item counts would catch with 80%
power is estimated from the observed flips: the per-item flip probabilities each way are
taken as linear in the rate between the clean run (rate 0) and the faulty run, and the
exact one-sided McNemar test's power at the gate's level (Bonferroni over gated tasks, a
conservative stand-in for Holm) is searched over the rate.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import ValidationError

from evals import stats
from evals.record.records import CANARY
from evals.run.arms import run_id_for
from evals.comparison import DEFAULT_REPORTS, run_ab
from evals.plan.config import ABConfig, ArmConfig, Arms
from evals.errors import ExitCode, UserError
from evals.analyse.exercise import FP8_KV_CACHE, PREFIX_CACHING, SPEC_DECODE, declared_optimizations
from evals.faults.catalog import FAULTS
from evals.hardware import probe
from evals.preflight.cpu_support import engine_on_cpu
from evals.record.run_record import read_run_record
from evals.record.run_record_model import RunRecord, TaskRecord
from evals.report.terminal_table import aligned

TARGET_POWER = 0.8


@dataclass(frozen=True, slots=True)
class FaultResult:
    fault: str
    rate: float
    harmful: bool
    options: dict
    verdict: str
    exit_code: int
    caught: bool
    """The gate said REGRESSION."""
    as_expected: bool
    """Caught if harmful, not caught if benign."""
    correct_to_wrong: int
    wrong_to_correct: int
    items_used: int
    items_planned: int
    fired: int
    min_detectable_rate: float | None
    """Smallest rate caught with 80% power (None: not within (0, 1])."""
    run_id: str
    models: str


def default_faults(config: ABConfig) -> list[dict]:
    """The faults that apply to what the candidate enables (and the benign control)."""
    declared = declared_optimizations(config.arm("baseline").engine,
                                      config.arm("candidate").engine)
    faults = []
    if PREFIX_CACHING in declared:
        faults.append({"name": "prefix_hit_overrun",
                       # the #43559 interaction: only where speculative decoding is on too
                       "only_with_spec_decode": SPEC_DECODE in declared})
        faults.append({"name": "prefix_key_collision"})
    if SPEC_DECODE in declared:
        faults.append({"name": "spec_unverified"})
    if FP8_KV_CACHE in declared:
        faults.append({"name": "kv_scale"})
    faults.append({"name": "benign_tie_noise"})
    return faults


def parse_fault_args(values: list[str]) -> list[dict]:
    """`NAME` or `NAME=RATE` from the command line."""
    faults = []
    for value in values:
        name, sep, rate = value.partition("=")
        if name not in FAULTS:
            raise UserError(f"--faults: unknown fault {name!r}; known: {', '.join(FAULTS)}.")
        fault: dict = {"name": name}
        if sep:
            try:
                fault["rate"] = float(rate)
            except ValueError:
                raise UserError(f"--faults: rate of {name} must be a number in (0, 1], "
                                f"got {rate!r}.") from None
        faults.append(fault)
    return faults


V1_RUNNER_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
"""On a GPU, vLLM's default model runner is Model Runner V2 (v1/worker/gpu/model_runner.py,
its own sampler and rejection sampler); the faults that live in sampling (spec_unverified,
benign_tie_noise) patch the V1 runner's. A canary on a GPU runs every arm, clean and
faulty, with the V1 runner, and says so (canary.json `runner`)."""


def with_v1_runner(config: ABConfig) -> ABConfig:
    """Both arms with VLLM_USE_V2_MODEL_RUNNER=0 (unless an arm sets it itself)."""
    arms = {name: config.arm(name).model_copy(update={"env": {**V1_RUNNER_ENV,
                                                             **config.arm(name).env}})
            for name in ("baseline", "candidate")}
    return config.model_copy(update={"arms": Arms(**arms)})


def faulty_config(config: ABConfig, fault: dict) -> ABConfig:
    """The config with `fault` injected into the candidate arm (validated like a config:
    an unknown fault, a rate outside (0, 1] or a fault that cannot apply is bad input)."""
    candidate = config.arm("candidate")
    try:
        arm = ArmConfig.model_validate({**candidate.model_dump(), "faults": [fault]})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise UserError(f"{config.source}: fault {fault.get('name')!r} for arms.candidate"
                        f"{'.' + where if where else ''}: "
                        f"{error['msg'].removeprefix('Value error, ')}.") from None
    suffix = fault["name"] + ("-spec" if fault.get("only_with_spec_decode") else "")
    return config.model_copy(update={"name": f"{config.name}-canary-{suffix}",
                                     "arms": Arms(baseline=config.arm("baseline"),
                                                  candidate=arm)})


def _flip_probs(task: TaskRecord) -> tuple[float, float]:
    n = max(int(task.n), 1)
    return task.correct_to_wrong / n, task.wrong_to_correct / n


def _planned(task: TaskRecord) -> int:
    looks = task.sequential
    return int(looks["n_items"]) if looks else int(task.n)


def min_detectable_rate(clean: list[TaskRecord], faulty: list[TaskRecord], rate: float,
                        alpha: float,
                        power: float = TARGET_POWER) -> float | None:
    """Smallest fault rate in (0, 1] whose expected flips give the exact one-sided McNemar
    gate `power` on at least one gated task, with flip probabilities linear in the rate
    between the clean run's tasks (rate 0) and the faulty run's (rate `rate`)."""
    gated = [t for t in clean if t.gated]
    level = alpha / max(len(gated), 1)
    faulty_tasks = {t.task: t for t in faulty}
    pairs = [(t, faulty_tasks[t.task]) for t in gated if t.task in faulty_tasks]

    def best_power(r: float) -> float:
        best = 0.0
        for c, f in pairs:
            b0, c0 = _flip_probs(c)
            bf, cf = _flip_probs(f)
            scale = r / rate
            pb = max(0.0, b0 + scale * (bf - b0))
            pc = max(0.0, c0 + scale * (cf - c0))
            if pb + pc > 0.999:  # the line leaves the probability simplex: stop at its edge
                pb, pc = 0.999 * pb / (pb + pc), 0.999 * pc / (pb + pc)
            discordance, drop = pb + pc, pb - pc
            if drop <= 0:
                continue
            best = max(best, stats.mcnemar_power(_planned(c), drop, discordance, level,
                                                 method="exact"))
        return best

    if best_power(1.0) < power:
        return None
    low, high = 0.0, 1.0
    for _ in range(30):  # bisection to ~1e-9; power grows with the rate
        mid = (low + high) / 2
        if best_power(mid) >= power:
            high = mid
        else:
            low = mid
    return high


def _result(fault: dict, code: ExitCode, run_dir: Path, clean: RunRecord,
            alpha: float) -> FaultResult:
    summary = read_run_record(run_dir)
    info = FAULTS[fault["name"]]
    gated = [t for t in summary.tasks if t.gated]
    caught = summary.verdict == "REGRESSION"
    requested = (summary.faults or {}).get("candidate", {})
    fired = int(sum(requested.get("fired", {}).values())) if requested else 0
    rate = float(requested.get("requested", [{}])[0].get("rate", info.default_rate)) \
        if requested else float(fault.get("rate", info.default_rate))
    return FaultResult(
        fault=fault["name"], rate=rate, harmful=info.harmful,
        options={k: v for k, v in fault.items() if k not in ("name", "rate")},
        verdict=summary.verdict, exit_code=int(code), caught=caught,
        # a fault that never fired tested nothing: a failed canary, whatever the verdict
        as_expected=caught == info.harmful and fired > 0,
        correct_to_wrong=sum(t.correct_to_wrong for t in gated),
        wrong_to_correct=sum(t.wrong_to_correct for t in gated),
        items_used=sum(int(t.n) for t in gated), items_planned=sum(_planned(t) for t in gated),
        fired=fired,
        min_detectable_rate=min_detectable_rate(clean.tasks, summary.tasks, rate, alpha),
        run_id=run_dir.name, models=info.models)


def run_canary(config: ABConfig, reports_dir: Path = DEFAULT_REPORTS, *,
               faults: list[dict] | None = None, store_root: Path | None = None,
               echo=print) -> tuple[ExitCode, Path]:
    """The clean A/B, then one A/B per fault; canary.json and canary.html. Exit 0 only if
    every harmful fault was caught and no benign one was."""
    wanted = faults if faults is not None else default_faults(config)
    runner = "vLLM's default"
    if not engine_on_cpu(probe()):  # a GPU's vLLM: the sampling faults patch the V1 runner
        config, runner = with_v1_runner(config), "V1 (VLLM_USE_V2_MODEL_RUNNER=0)"
    configs = [(fault, faulty_config(config, fault)) for fault in wanted]  # all checked first
    canary_dir = Path(reports_dir) / f"canary-{run_id_for(config)}"
    started = time.time()
    echo(f"[evals] canary: clean run of {config.name}, then {len(configs)} fault(s): "
         f"{', '.join(f['name'] for f in wanted)}")
    clean_code, clean_dir = run_ab(config, reports_dir, store_root=store_root, echo=echo)
    clean = read_run_record(clean_dir)
    clean_seconds = time.time() - started
    results = []
    for fault, faulty in configs:
        echo(f"[evals] canary: candidate with fault {fault['name']}")
        code, run_dir = run_ab(faulty, reports_dir, store_root=store_root, echo=echo)
        results.append(_result(fault, code, run_dir, clean, config.gate.alpha))
    data = {
        "config": config.source, "name": config.name,
        "clean": {"run_id": clean_dir.name, "verdict": clean.verdict,
                  "exit_code": int(clean_code), "wall_seconds": round(clean_seconds, 1)},
        "faults": [asdict(r) for r in results],
        "exercise": clean.exercise,
        "runner": runner,
        "wall_seconds": round(time.time() - started, 1),
        "target_power": TARGET_POWER,
        "passed": all(r.as_expected for r in results),
    }
    canary_dir.mkdir(parents=True, exist_ok=True)
    CANARY.write(canary_dir / "canary.json", data)
    data = CANARY.stamp(data)
    from evals.report.canary import write_canary_page  # rendering is the last step

    page = write_canary_page(data, canary_dir / "canary.html")
    echo(render_canary_table(data))
    echo(f"canary report: {page}")
    missed = [r for r in results if not r.as_expected]
    if missed:
        for r in missed:
            why = "it never fired (tested nothing)" if not r.fired else f"gave {r.verdict}"
            echo(f"CANARY FAILED: {r.fault} ({'harmful' if r.harmful else 'benign'}) {why}")
        return ExitCode.REGRESSION, canary_dir
    return ExitCode.PASS, canary_dir


def _rate_text(x: float | None) -> str:
    return "> 1 (not within reach)" if x is None else f"{x:.3g}"


def render_canary_table(data: dict) -> str:
    header = ("fault", "rate", "harmful", "verdict", "exit", "c->w", "w->c", "items",
              "fired", "caught", "min rate @80%")
    rows = [header]
    for r in data["faults"]:
        name = r["fault"] + (" (only with spec decode)" if r["options"].get(
            "only_with_spec_decode") else "")
        rows.append((name, f"{r['rate']:g}", "yes" if r["harmful"] else "no", r["verdict"],
                     str(r["exit_code"]), str(r["correct_to_wrong"]), str(r["wrong_to_correct"]),
                     f"{r['items_used']}/{r['items_planned']}", str(r["fired"]),
                     ("yes" if r["caught"] else "no") + ("" if r["as_expected"] else " (!)"),
                     _rate_text(r["min_detectable_rate"])))
    lines = aligned(rows)
    clean = data["clean"]
    lines.append("")
    lines.append(f"clean candidate: {clean['verdict']} (exit {clean['exit_code']}); canary "
                 f"{'PASSED' if data['passed'] else 'FAILED'}: every harmful fault must give "
                 "REGRESSION, every benign one must not")
    lines.append(f"wall time: {data['wall_seconds']:.0f} s in all, {clean['wall_seconds']:.0f} s "
                 "of it the clean A/B run")
    return "\n".join(lines)
