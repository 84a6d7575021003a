"""Items needed to detect a change by the distribution-shift test vs by accuracy, at 80%
power, for real changes on the embedded model.

    python benchmarks/bench_logprob_shift.py [CONFIG ...] [--runs RUN_DIR ...]
        [--reps 200] [--seed 1]

Each CONFIG (default: configs/cpu/noised_weights.yaml and configs/cpu/kv_fp8.yaml, two real
changes, and configs/cpu/mtp_prefix.yaml, which on this CPU backend changes no number) is run
with `python -m evals ab` with `logprobs: 5` and `noise_floor: true` added (arms the run
store holds are reused); a config this machine refuses (exit 2, e.g. the FP8 KV cache on a
CPU without AVX-512) is skipped with its message. `--runs` analyses finished runs instead.

Per task of each run:
- **accuracy**: the gate's one-sided exact McNemar test of a drop, at the run's alpha:
  items needed for 80% power at the measured drop and discordance
  (evals.stats.power.items_needed_for_drop, exact); "never" when the candidate did not
  score lower.
- **shift**: the shift test (evals.stats.divergence.shift_test: the mean of KL(b || c) -
  KL(b || A/A rerun) beyond the run's margin delta, one-sided t-test) on n items drawn with replacement
  from the run's paired items, `reps` times per n: the smallest n of a doubling grid whose
  rejection rate at alpha reaches 80%; "> N" when the run's own N items do not reach it.
The ratio is shift items / accuracy items (below 1: the shift test needs fewer).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.analyse.shift import choice_items, generation_items  # noqa: E402
from evals.pair.logprobs import read_arm_logprobs  # noqa: E402
from evals.pair.pairing import pair_task  # noqa: E402
from evals.pair.samples import read_output_dir  # noqa: E402
from evals.plan.config import SHIFT_MARGIN_NATS  # noqa: E402
from evals.stats.divergence import shift_test  # noqa: E402
from evals.stats.power import items_needed_for_drop  # noqa: E402

RERUN = "baseline_rerun"
POWER = 0.8


def item_kls(run: Path, task: str, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per paired item: KL(b || c), KL(b || rerun), and whether the candidate scored lower."""
    arms = {a: run / "arms" / a for a in ("baseline", "candidate", RERUN)}
    samples = {a: read_output_dir(d / "lm_eval", [task]) for a, d in arms.items()}
    lp = {a: read_arm_logprobs(d, [task]).get(task) for a, d in arms.items()}
    bc = pair_task(samples["baseline"], samples["candidate"], task, metric, None)
    br = pair_task(samples["baseline"], samples[RERUN], task, metric, bc.filter)
    if lp["baseline"] is not None and lp["baseline"].items:
        c_items = generation_items(bc, lp["baseline"], lp["candidate"])
        r_items = generation_items(bc, lp["baseline"], lp[RERUN])
    else:
        c_items, r_items = choice_items(bc), choice_items(br)
    ids = [d for d in bc.doc_ids if d in c_items and d in r_items]
    index = {d: i for i, d in enumerate(bc.doc_ids)}
    return (np.array([c_items[d].mean_kl for d in ids]),
            np.array([r_items[d].mean_kl for d in ids]),
            np.array([bc.baseline[index[d]] - bc.candidate[index[d]] for d in ids]))


def shift_items_needed(kl_c, kl_r, alpha: float, margin: float, reps: int, rng
                       ) -> tuple[str, int | None]:
    n_have = kl_c.size
    n = 5
    while True:
        size = min(n, n_have)
        hits = 0
        for _ in range(reps):
            pick = rng.integers(0, n_have, size)
            result = shift_test(kl_c[pick], kl_r[pick], rng=rng, margin=margin,
                                n_resamples=100)
            hits += result.pvalue <= alpha
        if hits / reps >= POWER:
            return str(size), size
        if size >= n_have:
            return f"> {n_have} (power {hits / reps:.0%} at {n_have})", None
        n *= 2


def accuracy_items_needed(drops: np.ndarray, alpha: float) -> tuple[str, int | None]:
    correct_to_wrong = float(np.mean(drops > 0))
    wrong_to_correct = float(np.mean(drops < 0))
    drop = correct_to_wrong - wrong_to_correct
    if drop <= 0:
        return f"never (no drop: {correct_to_wrong:.1%} c->w, {wrong_to_correct:.1%} w->c)", None
    n = items_needed_for_drop(drop, correct_to_wrong + wrong_to_correct, alpha, POWER,
                              method="exact")
    return f"{n} (drop {drop * 100:.2f} pts, discordance {(correct_to_wrong + wrong_to_correct):.1%})", n


DEFAULT_CONFIGS = ["configs/cpu/noised_weights.yaml", "configs/cpu/kv_fp8.yaml",
                   "configs/cpu/mtp_prefix.yaml"]


def run_with_shift(config: Path, reports: Path) -> Path | None:
    """`ab` on the config with logprobs and the A/A rerun; its run folder (None: refused)."""
    import subprocess

    # beside the config: its relative model path resolves against the file that sets it
    shifted = config.with_name(f".{config.stem}-shift.yaml")
    shifted.write_text(f"extends: {config.name}\nname: {config.stem.replace('_', '-')}-shift\n"
                       "logprobs: 5\nnoise_floor: true\n", encoding="utf-8")
    try:
        result = subprocess.run([sys.executable, "-m", "evals", "ab", str(shifted),
                                 "--reports", str(reports)], cwd=ROOT, capture_output=True,
                                text=True)
    finally:
        shifted.unlink()
    if result.returncode == 2:
        print(f"{config}: refused here (exit 2): {result.stderr.strip().splitlines()[-1]}")
        return None
    if result.returncode not in (0, 1, 3):
        sys.exit(f"{config}: ab exited {result.returncode}:\n{result.stdout[-2000:]}")
    verdict = next((line for line in result.stdout.splitlines() if line.startswith("VERDICT")),
                   "")
    print(f"{config}: {verdict}")
    (run,) = [d for d in reports.iterdir() if d.name.startswith(shifted.stem[1:].replace(
        "_", "-"))]
    return run


def main() -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", type=Path)
    parser.add_argument("--runs", nargs="+", type=Path, default=[])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    runs = list(args.runs)
    scratch = tempfile.TemporaryDirectory()
    if not runs:
        for config in args.configs or [ROOT / c for c in DEFAULT_CONFIGS]:
            run = run_with_shift(Path(config).resolve(), Path(scratch.name))
            if run is not None:
                runs.append(run)
        print()
    print(f"{'run':<28}{'task':<28}{'shift test: items':>26}  {'accuracy: items':<44}{'ratio':>7}")
    for run in runs:
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        alpha = float(summary["gate"]["alpha"])
        # the run's own delta (its shift tests record it); the default for older runs
        margin = next((t["test"]["margin"] for t in (summary.get("shift") or {}).get("tasks", [])
                       if (t.get("test") or {}).get("margin") is not None), SHIFT_MARGIN_NATS)
        for task in summary["tasks"]:
            if not task.get("gated", True):
                continue
            kl_c, kl_r, drops = item_kls(run, task["task"], task["metric"])
            shown_s, n_s = shift_items_needed(kl_c, kl_r, alpha, margin, args.reps, rng)
            shown_a, n_a = accuracy_items_needed(drops, alpha)
            ratio = f"{n_s / n_a:.3f}" if n_s and n_a else ("0" if n_s and n_a is None else "-")
            if n_s and n_a is None:
                ratio = "0 (acc. never)"
            print(f"{summary['run_id'][:27]:<28}{task['task'][:27]:<28}{shown_s:>26}  "
                  f"{shown_a:<44}{ratio:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
