"""Command line: `python -m evals {ab,compare,report,plan,check-engine-args}`.

Exit codes: 0 pass, 1 regression, 2 bad input or usage, 3 inconclusive, 4 a run failed.
Errors are one sentence on stderr; a traceback only with --debug.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evals.errors import ExitCode, RunFailed, UserError

DEFAULT_CONFIG = "configs/cpu/mtp_prefix.yaml"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors exit 2 like every other bad input
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(int(ExitCode.BAD_INPUT))


def _metric_pairs(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        task, sep, metric = value.partition("=")
        if not sep or not task or not metric:
            raise UserError(f"--metric takes TASK=METRIC, got {value!r}.")
        out[task] = metric
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m evals", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ab = sub.add_parser("ab", help="run baseline and candidate arms from a config and gate")
    ab.add_argument("config", nargs="?", default=DEFAULT_CONFIG,
                    help=f"config YAML (default: {DEFAULT_CONFIG})")
    ab.add_argument("--reports", default=None, help="reports directory (default: reports/)")
    ab.add_argument("--fresh", action="store_true", help="rerun arms even if finished")

    cmp_ = sub.add_parser("compare", help="analyse two existing lm-eval --log_samples dirs")
    cmp_.add_argument("baseline_dir")
    cmp_.add_argument("candidate_dir")
    cmp_.add_argument("--alpha", type=float, default=0.05)
    cmp_.add_argument("--margin", type=float, default=0.02,
                      help="non-inferiority margin in accuracy units (0.02 = 2 points)")
    cmp_.add_argument("--metric", action="append", default=[], metavar="TASK=METRIC")
    cmp_.add_argument("--seed", type=int, default=1234)
    cmp_.add_argument("--reports", default=None)

    rep = sub.add_parser("report", help="re-render the reports of a stored run directory")
    rep.add_argument("run_dir")

    pln = sub.add_parser("plan", help="items needed for a drop or a margin; MDE for N items")
    pln.add_argument("--discordance", type=float, required=True,
                     help="share of items whose correctness differs between arms (e.g. 0.05)")
    pln.add_argument("--drop", type=float, help="drop to detect, accuracy units (0.02 = 2 pts)")
    pln.add_argument("--margin", type=float, help="non-inferiority margin, accuracy units")
    pln.add_argument("--items", type=int, help="items available: report the minimum detectable drop")
    pln.add_argument("--alpha", type=float, default=0.05)
    pln.add_argument("--power", type=float, default=0.8)

    chk = sub.add_parser("check-engine-args",
                         help="validate configs' engine arguments with vLLM's own parser")
    chk.add_argument("configs", nargs="+")
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    from evals.config import GateConfig, load_config

    if args.command == "ab":
        from evals.comparison import DEFAULT_REPORTS, run_ab

        config = load_config(args.config)
        code, _ = run_ab(config, Path(args.reports) if args.reports else DEFAULT_REPORTS,
                         fresh=args.fresh)
        return int(code)
    if args.command == "compare":
        from evals.comparison import DEFAULT_REPORTS, run_compare

        try:
            gate = GateConfig(alpha=args.alpha, margin=args.margin)
        except Exception as exc:
            raise UserError(f"--alpha/--margin: {exc.errors()[0]['msg']}.") from None
        code, _ = run_compare(Path(args.baseline_dir), Path(args.candidate_dir), gate=gate,
                              seed=args.seed, metrics=_metric_pairs(args.metric),
                              reports_dir=Path(args.reports) if args.reports else DEFAULT_REPORTS)
        return int(code)
    if args.command == "report":
        from evals.report import write_reports

        written = write_reports(Path(args.run_dir))
        for kind, path in written.items():
            print(f"{kind}: {path}")
        return 0
    if args.command == "plan":
        from evals.planning import plan

        for line in plan(discordance=args.discordance, alpha=args.alpha, power=args.power,
                         drop=args.drop, margin=args.margin, items=args.items):
            print(line)
        return 0
    if args.command == "check-engine-args":
        from evals.runner.engine_args import check_config_engine_args

        for path in args.configs:
            config = load_config(path)
            for line in check_config_engine_args(config):
                print(line)
        return 0
    raise UserError(f"unknown command {args.command!r}.")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except UserError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    except RunFailed as exc:
        if args.debug:
            raise
        print(f"run failed: {exc}", file=sys.stderr)
        return int(ExitCode.RUN_FAILED)
    except KeyboardInterrupt:
        print("interrupted; finished tasks are kept and a rerun resumes", file=sys.stderr)
        return int(ExitCode.RUN_FAILED)
