"""The sampled canary test's clean A/B (tests/engine/test_sampled_canary.py: tiny_addition, 40
items x 8 repeats, T 0.6 / top_p 0.95, MTP vs plain, cpu_sampler_expand in both arms,
answer_distribution: fail) with seeds 1-20 at gate alpha 0.05, each with its own run store.
Session 34 ran it at commit 7c662c3, when the test gated at 0.05, from the repository root:
    .nox/tests/bin/python benchmarks/results/cpu-avx512/sampled_clean_seeds_session34.py OUT
which prints the rows of sampled_clean_seeds_session34.txt (seed, exit code, verdict, baseline and
candidate pass rates, delta, items whose rate fell and rose, drop p, distribution p)."""
import json
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, "tests/engine")
import test_sampled_canary as t  # noqa: E402

out = Path(sys.argv[1])
for seed in range(1, 21):
    d = out / f"s{seed}"
    d.mkdir(parents=True, exist_ok=True)
    config = t._config(d)
    data = yaml.safe_load(config.read_text())
    data["seed"] = seed
    data["gate"]["alpha"] = 0.05
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    run = subprocess.run([sys.executable, "-m", "evals", "ab", str(config), "--reports", str(d / "reports"),
                    "--store", str(d / "store")], capture_output=True, text=True)
    summary = json.loads(next((d / "reports").glob("*/summary.json")).read_text())
    task = summary["tasks"][0]
    print(seed, run.returncode, summary["verdict"], round(task["baseline_mean"], 4),
          round(task["candidate_mean"], 4), round(task["delta"], 4),
          task["repeats"]["items_dropped"], task["repeats"]["items_gained"],
          task["regression_pvalue"], task["answer_distribution"]["pvalue"], flush=True)
