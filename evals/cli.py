"""Command line of the accuracy-regression gate: `python -m evals COMMAND ...`.

Commands: ab, canary, drift, compare, report, plan, doctor, check-engine-args, record,
runs, pin, history, gate-config, release.

Exit codes: 0 pass, 1 regression, 2 bad input or usage, 3 inconclusive, 4 a run failed.
Errors are one sentence on stderr; a traceback only with --debug.
"""

from __future__ import annotations

import argparse
import signal
import sys
import traceback
from pathlib import Path

from evals.atomic_files import WRITE_ERRNOS
from evals.errors import ExitCode, RunFailed, UserError
from evals.paths import REPORTS_DIR
from evals.text_hygiene import visible

DEFAULT_CONFIG = "configs/cpu/mtp_prefix.yaml"
# the commands that end in a verdict: their CI outputs (evals.report.ci_outputs)
RUN_COMMANDS = ("ab", "drift", "compare", "release")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors exit 2 like every other bad input
        print(f"error: {self.prog}: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(int(ExitCode.BAD_INPUT))


def _metric_pairs(values: list[str], flag: str = "--metric", what: str = "METRIC"
                  ) -> dict[str, str]:
    out = {}
    for value in values:
        task, sep, metric = value.partition("=")
        if not sep or not task or not metric:
            raise UserError(f"{flag} takes TASK={what}, got {value!r}.")
        out[task] = metric
    return out


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {value!r}")
    return number


def _seed(value: str) -> int:
    """argparse type: numpy seeds are non-negative integers."""
    try:
        seed = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {value!r}") from None
    if seed < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {seed}")
    return seed


def _reports_dir(value: str | None) -> Path:
    """--reports (default: reports/), checked before any engine starts: a directory this
    process can write to."""
    from evals.atomic_files import writable_dir

    path = Path(value) if value is not None else REPORTS_DIR
    if path.exists() and not path.is_dir():
        raise UserError(f"--reports {value}: this is a file; name a directory for the reports.")
    return writable_dir(path, "--reports")


def _store_root(value: str | None) -> Path | None:
    """--store (else $EVALS_STORE), checked as --reports is; None: the default store."""
    import os

    from evals.atomic_files import writable_dir
    from evals.store import ENV_VAR

    if value is not None:
        return writable_dir(Path(value), "--store")
    if os.environ.get(ENV_VAR):
        writable_dir(Path(os.environ[ENV_VAR]), f"${ENV_VAR}")
    return None


def _checked_name(value: str, flag: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,80}", value):
        raise UserError(f"{flag} takes letters, digits, '_', '.' and '-' (at most 80), got "
                        f"{value!r}.")
    return value


def _given(**options) -> dict:
    """The options the command line set (the others keep the config's defaults)."""
    return {name: value for name, value in options.items() if value is not None}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m evals", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ab = sub.add_parser("ab", help="run baseline and candidate arms from a config and gate "
                        "(or every arm of a study against its baseline)")
    ab.add_argument("config", nargs="?", default=DEFAULT_CONFIG,
                    help=f"config YAML (default: {DEFAULT_CONFIG})")
    ab.add_argument("--reports", default=None, help="reports directory (default: reports/)")
    ab.add_argument("--fresh", action="store_true",
                    help="rerun arms even if finished, and reuse nothing from the run store")
    ab.add_argument("--store", help="run store directory (default: $EVALS_STORE, else "
                    "<reports>/store/)")
    ab.add_argument("--parallel", type=_positive_int, default=None, metavar="N",
                    help="studies: run at most N arms at once on disjoint devices (default: "
                    "as many as the GPUs fit; 1 on a CPU machine); 1 runs them one after "
                    "another")
    ab.add_argument("--arms-per-gpu", type=_positive_int, default=1, metavar="K",
                    help="studies on this machine: up to K one-GPU arms share each GPU, each "
                    "with its engine's gpu_memory_utilization share (K x each share at most "
                    "1.0, e.g. 0.45 for K=2); default 1: each arm has its GPUs to itself")
    ab.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="where arms run: this machine (default) or Ray tasks, each with the "
                    "devices it needs (needs `pip install -e .[ray]`)")
    ab.add_argument("--ray-address", default=None, metavar="ADDRESS",
                    help="with --executor ray: an existing cluster (`auto`, `ray://host:10001`); "
                    "default: a local Ray on this machine")
    ab.add_argument("--ray-shard", choices=("arm", "task"), default="arm",
                    help="with --executor ray: one Ray task per arm (default) or per arm x "
                    "task (each with its own engine; spreads large runs over more nodes)")
    ab.add_argument("--allow-undeclared-diff", action="store_true",
                    help="run although the config audit found differences between the arms "
                    "that `intended_change` does not declare (recorded in the report)")

    can = sub.add_parser("canary", help="inject faults modeled on real vLLM bugs into the "
                         "candidate and check that the gate catches them")
    can.add_argument("config", nargs="?", default=DEFAULT_CONFIG,
                     help=f"config YAML (default: {DEFAULT_CONFIG})")
    can.add_argument("--faults", nargs="+", metavar="NAME[=RATE]",
                     help="faults to inject (default: every fault that applies to what the "
                     "candidate enables, plus benign_tie_noise)")
    can.add_argument("--reports", default=None, help="reports directory (default: reports/)")
    can.add_argument("--store", help="run store directory (default: $EVALS_STORE, else "
                     "<reports>/store/)")

    dft = sub.add_parser("drift", help="rerun a deployment's arm and compare it with its "
                         "pinned golden run; EWMA chart over the drift runs")
    dft.add_argument("config")
    dft.add_argument("--reports", default=None, help="reports directory (default: reports/)")
    dft.add_argument("--store", help="run store directory (default: $EVALS_STORE, else "
                     "<reports>/store/)")
    dft.add_argument("--run-id", help="name of the drift run (default: <config>-<hash>-drift-"
                     "<UTC date>; rerunning the same id resumes it)")

    cmp_ = sub.add_parser("compare", help="analyse two existing lm-eval --log_samples dirs")
    cmp_.add_argument("baseline_dir")
    cmp_.add_argument("candidate_dir")
    # no defaults here: an option left out takes the config's (GateConfig, DEFAULT_SEED)
    cmp_.add_argument("--alpha", type=float, help="one-sided significance level "
                      "(default: a config's default)")
    cmp_.add_argument("--margin", type=float,
                      help="non-inferiority margin in accuracy units (0.02 = 2 points; "
                      "default: a config's default)")
    cmp_.add_argument("--metric", action="append", default=[], metavar="TASK=METRIC[,FILTER]",
                      help="the metric a task is gated on, and its filter where lm-eval logged "
                      "several (e.g. gsm8k=exact_match,maj@8)")
    cmp_.add_argument("--cluster", action="append", default=[], metavar="TASK=FIELD",
                      help="a document field grouping the task's items (e.g. a passage id): "
                      "cluster-robust tests and intervals")
    cmp_.add_argument("--seed", type=_seed, help="default: a config's default")
    cmp_.add_argument("--reports", default=None)
    cmp_.add_argument("--store", help="run store directory (default: $EVALS_STORE, else "
                      "<reports>/store/)")
    cmp_.add_argument("--name", default="compare",
                      help="run id prefix (default: compare); ids end in a hash of the outputs")
    cmp_.add_argument("--deployment", help="name the run store charts this comparison under "
                      "(default: one per pair of directories)")

    rep = sub.add_parser("report", help="re-render the reports of a stored run directory")
    rep.add_argument("run_dir")

    pln = sub.add_parser("plan", help="items needed for a drop or a margin; MDE for N items")
    pln.add_argument("--discordance", type=float, required=True,
                     help="share of items whose correctness differs between arms (e.g. 0.05)")
    pln.add_argument("--drop", type=float, help="drop to detect, accuracy units (0.02 = 2 pts)")
    pln.add_argument("--margin", type=float, help="non-inferiority margin, accuracy units")
    pln.add_argument("--items", type=int, help="items available: report the minimum detectable drop")
    pln.add_argument("--alpha", type=float, help="default: a config's default")
    pln.add_argument("--power", type=float, default=0.8)

    doc = sub.add_parser("doctor", help="preflight file checks of a model directory or of "
                         "both arms' models in a config (no engine)")
    doc.add_argument("target", nargs="?", default=DEFAULT_CONFIG, metavar="MODEL_OR_CONFIG",
                     help=f"model directory or config YAML (default: {DEFAULT_CONFIG})")

    chk = sub.add_parser("check-engine-args",
                         help="validate configs' engine arguments with vLLM's own parser")
    chk.add_argument("configs", nargs="+")

    store_help = "run store directory (default: $EVALS_STORE, else reports/store/)"
    rec = sub.add_parser("record", help="record a finished run directory into the run store")
    rec.add_argument("run_dir")
    rec.add_argument("--deployment", help="what the run tracks over time (default: config name)")
    rec.add_argument("--kind", help="kind of run (default: the summary's, e.g. ab)")
    rec.add_argument("--store", help=store_help)
    rec.add_argument("--replace", action="store_true",
                     help="overwrite a recorded run of the same id with another result "
                     "(never a pinned golden run)")

    runs = sub.add_parser("runs", help="list the recorded runs, newest first")
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--deployment")
    runs.add_argument("--store", help=store_help)

    pin = sub.add_parser("pin", help="mark a recorded run as its deployment's golden run")
    pin.add_argument("run_id")
    pin.add_argument("--deployment", required=True)
    pin.add_argument("--store", help=store_help)

    hist = sub.add_parser("history", help="write the trend page of the recorded runs")
    hist.add_argument("--deployment", help="one deployment (default: all)")
    hist.add_argument("--out", help="output file (default: history.html next to the store "
                      "directory, i.e. reports/history.html)")
    hist.add_argument("--store", help=store_help)

    gcf = sub.add_parser("gate-config", help="print a finished run's verdict in one line "
                         "(`REGRESSION exit=1 RUN_ID: reason`) and exit with its exit code, "
                         "for CI systems that read only stdout")
    gcf.add_argument("run", metavar="RUN_DIR", help="a run directory (reports/<run-id>) or its "
                     "summary.json")

    rel = sub.add_parser("release", help="one release decision (GO / NO-GO / INCONCLUSIVE) "
                         "from finished runs under a release policy")
    rel.add_argument("policy", metavar="POLICY.yaml", help="the release policy (tiers, margins, "
                     "evidence rules; see examples/release/policy.yaml)")
    rel.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run directories "
                     "(reports/<run-id>); default: every run in the run store")
    rel.add_argument("--store", help="run store directory when no RUN_DIR is given (default: "
                     "$EVALS_STORE, else <reports>/store/)")
    rel.add_argument("--reports", default=None, help="reports directory (default: reports/)")
    rel.add_argument("--out", help="the release's folder (default: <reports>/release-<name>)")
    rel.add_argument("--as-of", metavar="TIME", help="measure the runs' ages at this UTC time "
                     "(ISO 8601, e.g. 2026-12-06 or 2026-12-06T12:00; default: now)")
    return parser


def _store(args: argparse.Namespace):
    from evals.store import RunStore

    return RunStore(Path(args.store) if args.store else None)


def _print_runs(store, entries) -> None:
    if not entries:
        print(f"no runs recorded in {store.root}")
        return
    rows = [("run", "date (UTC)", "kind", "config", "deployment", "verdict")]
    for e in entries:
        verdict = (e.verdict or "?") + (" (golden)" if e.golden else "")
        rows.append((e.run_id, e.created[:16].replace("T", " "), e.kind, e.config_name or "-",
                     e.deployment, "BROKEN" if e.problem else verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    for e in entries:
        if e.problem:
            print(f"broken: {e.problem}", file=sys.stderr)


def _ab(args: argparse.Namespace) -> int:
    from evals.plan.executor import Executor
    from evals.plan.study import Study, load_run_config

    # the config first: a bad one exits before the pipeline's imports (scipy, ~1 s)
    config = load_run_config(args.config)
    if args.ray_address and args.executor != "ray":
        raise UserError("--ray-address needs `--executor ray`.")
    if args.ray_shard != "arm" and args.executor != "ray":
        raise UserError("--ray-shard needs `--executor ray`.")
    if args.arms_per_gpu != 1 and args.executor == "ray":
        raise UserError("--arms-per-gpu is for arms run on this machine; with `--executor "
                        "ray` each arm is a Ray task with whole GPUs of its own.")
    if args.arms_per_gpu != 1 and not isinstance(config, Study):
        raise UserError("--arms-per-gpu is for studies (more than two arms or `factorial:`); "
                        "a two-arm config runs its arms one after another.")
    executor = Executor(ray=args.executor == "ray", address=args.ray_address,
                        parallel=args.parallel, arms_per_gpu=args.arms_per_gpu,
                        shard_tasks=args.ray_shard == "task")
    if isinstance(config, Study):
        from evals.pipelines.study import run_study

        from evals.report.ci_outputs import publish_study

        code, study_dir = run_study(config, _reports_dir(args.reports),
                                    fresh=args.fresh,
                                    store_root=_store_root(args.store),
                                    allow_undeclared=args.allow_undeclared_diff,
                                    executor=executor)
        publish_study(study_dir)
        return int(code)
    if args.parallel not in (None, 1) and not executor.ray:
        raise UserError("--parallel is for studies (more than two arms or `factorial:`) and "
                        "`--executor ray`; a two-arm config runs its arms one after another.")
    from evals.pipelines.ab import run_ab

    code, run_dir = run_ab(config, _reports_dir(args.reports),
                           fresh=args.fresh,
                           store_root=_store_root(args.store),
                           allow_undeclared=args.allow_undeclared_diff, executor=executor)
    return _published(code, run_dir)


def _canary(args: argparse.Namespace) -> int:
    from evals.plan.config import load_config
    from evals.plan.canary import parse_fault_args

    config = load_config(args.config)
    faults = parse_fault_args(args.faults) if args.faults else None
    from evals.pipelines.canary import run_canary

    code, _ = run_canary(config, _reports_dir(args.reports),
                         faults=faults, store_root=_store_root(args.store))
    return int(code)


def _drift(args: argparse.Namespace) -> int:
    from evals.plan.config import load_config

    config = load_config(args.config)
    from evals.pipelines.drift import run_drift

    code, run_dir = run_drift(config, _reports_dir(args.reports),
                              store_root=_store_root(args.store),
                              run_id=args.run_id)
    return _published(code, run_dir)


def _compare(args: argparse.Namespace) -> int:
    from evals.plan.config import GateConfig
    from evals.pipelines.compare import run_compare

    try:
        gate = GateConfig(**_given(alpha=args.alpha, margin=args.margin))
    except Exception as exc:
        error = exc.errors()[0]
        flag = "--" + str(error["loc"][0]) if error.get("loc") else "--alpha/--margin"
        raise UserError(f"{flag} {error.get('input')!r}: {error['msg']}.") from None
    code, run_dir = run_compare(
        Path(args.baseline_dir), Path(args.candidate_dir), gate=gate,
        **_given(seed=args.seed), metrics=_metric_pairs(args.metric),
        clusters=_metric_pairs(args.cluster, "--cluster", "FIELD"),
        name=_checked_name(args.name, "--name"),
        deployment=(_checked_name(args.deployment, "--deployment")
                    if args.deployment else None),
        store_root=_store_root(args.store),
        reports_dir=_reports_dir(args.reports))
    return _published(code, run_dir)


def _report(args: argparse.Namespace) -> int:
    from evals.report import write_reports

    written = write_reports(Path(args.run_dir))
    for kind, path in written.items():
        print(f"{kind}: {path}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from evals.plan.config import GateConfig
    from evals.plan.sample_size import plan

    alpha = GateConfig().alpha if args.alpha is None else args.alpha
    for line in plan(discordance=args.discordance, alpha=alpha, power=args.power,
                     drop=args.drop, margin=args.margin, items=args.items):
        print(line)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from evals.hardware import probe
    from evals.preflight.doctor import diagnose_path

    report = diagnose_path(args.target)
    print(f"platform: {probe().describe()}")
    for line in report.lines():
        print(line)
    return int(ExitCode.BAD_INPUT) if report.has_errors else 0


def _check_engine_args(args: argparse.Namespace) -> int:
    from evals.runner.engine_args import check_config_engine_args

    from evals.hardware import probe
    from evals.plan.study import Study, load_run_config
    from evals.preflight.cpu_support import gpu_refusal, refusal, unsupported_settings

    platform = probe()
    print(f"platform: {platform.describe()}")
    gpu_only: set[str] = set()

    for path in args.configs:
        config = load_run_config(path)
        checks = [(config, None)]
        if isinstance(config, Study):  # every arm once, under its own name
            checks = [(c, ({"baseline": config.baseline} if i == 0 else {}) |
                       {"candidate": arm})
                      for i, (arm, c) in enumerate(config.comparisons.items())]
        for one, names in checks:
            for line in check_config_engine_args(one, names):
                print(line)
            # what `ab` would refuse on this machine (a GPU config checked on a CPU
            # machine is still a valid config: reported, not an error)
            why = gpu_refusal(one, platform)
            if why:
                if one.source not in gpu_only:
                    print(f"{one.source}: not on this machine: {why}")
                gpu_only.add(one.source)
                continue
            shown = {role: f"arms.{name}" for role, name in
                     (names or {"baseline": "baseline", "candidate": "candidate"}).items()}
            for found in unsupported_settings(one, platform, arms=tuple(shown), names=shown):
                print(f"{one.source}: not on this machine's CPU: {refusal([found], platform)}")
    return 0


def _record(args: argparse.Namespace) -> int:
    stored = _store(args).record_run(Path(args.run_dir), kind=args.kind,
                                     deployment=args.deployment, replace_run=args.replace)
    print(f"recorded {stored.run_id} (deployment {stored.entry.deployment}) in "
          f"{stored.directory}")
    return 0


def _runs(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UserError(f"--limit must be 1 or more, got {args.limit}.")
    store = _store(args)
    _print_runs(store, store.list_runs(limit=args.limit, deployment=args.deployment,
                                       verify=True))
    return 0


def _pin(args: argparse.Namespace) -> int:
    entry = _store(args).pin(args.run_id, args.deployment)
    print(f"pinned {entry.run_id} as the golden run of {entry.deployment}")
    return 0


def _history(args: argparse.Namespace) -> int:
    from evals.report.trend import DEFAULT_TREND_FILE, write_trend

    store = _store(args)
    out = Path(args.out) if args.out else store.root.parent / DEFAULT_TREND_FILE
    print(f"history: {write_trend(store, args.deployment, out)}")
    return 0


def _gate_config(args: argparse.Namespace) -> int:
    return _verdict_line(Path(args.run))


def _release(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from evals.pipelines.release import run_release
    from evals.report.release import publish_release

    if args.store and args.run_dirs:
        raise UserError("--store names where to find the runs when no RUN_DIR is given; give "
                        "run directories or --store, not both.")
    as_of = None
    if args.as_of:
        try:
            as_of = datetime.fromisoformat(args.as_of)
        except ValueError:
            raise UserError(f"--as-of takes an ISO 8601 time such as 2026-12-06T12:00, got "
                            f"{args.as_of!r}.") from None
        as_of = as_of if as_of.tzinfo else as_of.replace(tzinfo=timezone.utc)
    code, out_dir, record = run_release(
        Path(args.policy), [Path(d) for d in args.run_dirs], reports_dir=_reports_dir(
            args.reports), out_dir=Path(args.out) if args.out else None,
        store_root=Path(args.store) if args.store else None, as_of=as_of)
    publish_release(record, out_dir)
    return int(code)


COMMANDS = {
    "ab": _ab,
    "canary": _canary,
    "drift": _drift,
    "compare": _compare,
    "report": _report,
    "plan": _plan,
    "doctor": _doctor,
    "check-engine-args": _check_engine_args,
    "record": _record,
    "runs": _runs,
    "pin": _pin,
    "history": _history,
    "gate-config": _gate_config,
    "release": _release,
}


def _dispatch(args: argparse.Namespace) -> int:
    command = COMMANDS.get(args.command)
    if command is None:
        raise UserError(f"unknown command {args.command!r}.")
    return command(args)


def _published(code, run_dir: Path) -> int:
    """A finished run's CI outputs (GitHub job summary and annotations, GitLab dotenv)."""
    from evals.report.ci_outputs import publish_run

    publish_run(run_dir)
    return int(code)


def _verdict_line(path: Path) -> int:
    """One line for CI systems that read only stdout; the exit code is the run's."""
    from evals.record.run_record import SUMMARY_FILE, read_run_record
    from evals.record.study_record import read_study_record
    from evals.paths import STUDY_FILE
    from evals.report.ci_outputs import run_outcome, study_line, verdict_line

    study = path if path.name == STUDY_FILE else path / STUDY_FILE
    if study.is_file():  # a study: its own verdict and exit code
        record = read_study_record(study)
        print(study_line(record))
        return record.exit_code
    if path.is_file():
        if path.name != SUMMARY_FILE:
            raise UserError(f"{path}: name a run directory (reports/<run-id>) or its "
                            f"{SUMMARY_FILE}.")
        path = path.parent
    elif not path.is_dir():
        what = "not a run directory" if path.exists() else "no such run directory"
        raise UserError(f"{path}: {what}; name reports/<run-id> of a finished run or its "
                        f"{SUMMARY_FILE}.")
    summary = read_run_record(path)
    print(verdict_line(summary, path / SUMMARY_FILE))
    return int(run_outcome(summary, path / SUMMARY_FILE)[1])


def _failed(args: argparse.Namespace, code: ExitCode, message: str) -> None:
    """A run command that ended without a verdict still tells the CI system why."""
    if getattr(args, "command", None) in RUN_COMMANDS:
        from evals.report.ci_writes import publish_failure

        publish_failure(code, message)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # `kill` (SIGTERM) stops a run like Ctrl-C: workers and servers are stopped, work is kept
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _dispatch(args)
    except UserError as exc:
        if args.debug:
            raise
        message = visible(' '.join(str(exc).splitlines()))
        print(f"error: {message}", file=sys.stderr)
        _failed(args, ExitCode.BAD_INPUT, message)
        return int(ExitCode.BAD_INPUT)
    except RunFailed as exc:
        if args.debug:
            raise
        print(f"run failed: {exc}", file=sys.stderr)
        _failed(args, ExitCode.RUN_FAILED, str(exc))
        return int(ExitCode.RUN_FAILED)
    except KeyboardInterrupt:
        message = "interrupted; finished tasks are kept and a rerun resumes"
        print(message, file=sys.stderr)
        _failed(args, ExitCode.RUN_FAILED, message)
        return int(ExitCode.RUN_FAILED)
    except OSError as exc:
        if args.debug or exc.errno not in WRITE_ERRNOS or not exc.filename:
            return _internal_error(args)
        # a location that filled up or turned read-only mid-run: the path, not a traceback
        message = (f"cannot write {exc.filename}: {exc.strerror}; free space or fix the "
                   "permissions there and rerun (finished tasks are kept and resume)")
        print(f"run failed: {message}", file=sys.stderr)
        _failed(args, ExitCode.RUN_FAILED, message)
        return int(ExitCode.RUN_FAILED)
    except Exception:  # a bug of the suite: never exit 1, which means REGRESSION
        return _internal_error(args)


def _internal_error(args: argparse.Namespace) -> int:
    """Called while an unexpected exception is handled: its traceback, and exit 4."""
    if args.debug:
        raise  # noqa: PLE0704 - the exception being handled by main
    traceback.print_exc()
    message = ("internal error (a bug in the suite; the traceback above helps its report); "
               "finished tasks are kept and a rerun resumes")
    print(message, file=sys.stderr)
    _failed(args, ExitCode.RUN_FAILED, message)
    return int(ExitCode.RUN_FAILED)
