"""Benchmark: build the report of a run with 10,000 flipped items, and open it in Chromium.

    /work/venv/bin/python benchmarks/bench_report.py [--items 12000] [--flipped 10000]

Prints a table: time for `write_reports` (median of --repeats), size of each output in
bytes, and the time headless Chromium takes from navigation start to the end of the
load event (Navigation Timing), median of --loads fresh tabs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "tests" / "report")]

from fake_runs import many_flips_run  # noqa: E402
from headless_chromium import CHROMIUM, Browser  # noqa: E402

from evals.report import write_reports  # noqa: E402

NAVIGATION = ("(() => { const n = performance.getEntriesByType('navigation')[0];"
              " return [n.domContentLoadedEventEnd, n.loadEventEnd]; })()")


def _browser_load(html: Path, loads: int) -> tuple[float, float] | None:
    if not CHROMIUM.exists():
        return None
    dom, load = [], []
    with Browser() as browser:
        for _ in range(loads):
            page = browser.page()
            page.goto(html.as_uri())
            # loadEventEnd is set just after the load event's handlers return
            for _ in range(50):
                dom_end, load_end = page.evaluate(NAVIGATION)
                if load_end > 0:
                    break
                time.sleep(0.01)
            dom.append(dom_end)
            load.append(load_end)
    return statistics.median(dom), statistics.median(load)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=12_000)
    parser.add_argument("--flipped", type=int, default=10_000)
    parser.add_argument("--max-flipped-items", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        started = time.perf_counter()
        run = many_flips_run(Path(tmp) / "run", n_items=args.items, n_flipped=args.flipped)
        setup = time.perf_counter() - started
        builds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            written = write_reports(run, max_flipped_items=args.max_flipped_items)
            builds.append(time.perf_counter() - started)
        timings = _browser_load(written["html"], args.loads)
        rows = [
            ("paired items / flipped", f"{args.items:,} / {args.flipped:,}"),
            ("flipped items embedded (cap)", f"{args.max_flipped_items:,}"),
            ("run setup (pipeline, not timed below)", f"{setup:.2f} s"),
            (f"write_reports, median of {args.repeats}", f"{statistics.median(builds):.3f} s"),
            ("paired_items.jsonl bytes", f"{(run / 'paired_items.jsonl').stat().st_size:,}"),
            ("report.html bytes", f"{written['html'].stat().st_size:,}"),
            ("summary.md bytes", f"{written['markdown'].stat().st_size:,}"),
            ("junit.xml bytes", f"{written['junit'].stat().st_size:,}"),
        ]
        if timings is None:
            rows.append(("chromium load", f"skipped: no {CHROMIUM}"))
        else:
            rows += [(f"chromium DOMContentLoaded, median of {args.loads}",
                      f"{timings[0]:.0f} ms"),
                     (f"chromium load event end, median of {args.loads}",
                      f"{timings[1]:.0f} ms")]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 16}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
