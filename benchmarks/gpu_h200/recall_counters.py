"""The exercise counters of every recall run under a reports folder, per arm, task and wave:
prefix-cache queries and hits (tokens), MTP drafts and draft tokens, preemptions, from the
workers' task records (`waves`, evals.runner.worker). A geometry that did not reproduce is
judged by these: a wave 2 without hits never resumed from the cache, a run without drafts
never speculated.

Usage: python benchmarks/gpu_h200/recall_counters.py REPORTS > counters.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = (("queries", "vllm:prefix_cache_queries"), ("hits", "vllm:prefix_cache_hits"),
           ("drafts", "vllm:spec_decode_num_drafts"),
           ("draft tokens", "vllm:spec_decode_num_draft_tokens"),
           ("accepted", "vllm:spec_decode_num_accepted_tokens"),
           ("preemptions", "vllm:num_preemptions"))


def rows(reports: Path):
    for record in sorted(reports.glob("*/arms/*/tasks/recall_*.json")):
        data = json.loads(record.read_text(encoding="utf-8"))
        run, arm = record.parents[3].name, record.parents[1].name
        for wave in data.get("waves", []):
            counters = wave["exercise"]
            yield [run, arm, data["task"], str(wave["wave"]), str(wave["items"])] + [
                f"{counters.get(name, 0):.0f}" for _, name in COLUMNS]


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: recall_counters.py REPORTS (a folder of runs)", file=sys.stderr)
        return 2
    header = ["run", "arm", "task", "wave", "items"] + [label for label, _ in COLUMNS]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows(Path(argv[0])):
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
