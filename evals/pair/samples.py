"""Reading lm-eval `--log_samples` output directories into our own record types.

Both the suite's own arm runs and a user's plain `lm_eval --log_samples` runs write
the same layout: `<dir>/<model>/samples_<task>_<timestamp>.jsonl` and
`<dir>/<model>/results_<timestamp>.json`. Everything downstream works on
`ArmSamples`, never on lm-eval objects.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from evals.errors import UserError
from evals.runner.layout import samples_files

_SURROGATES = re.compile("[\ud800-\udfff]")
_RESULTS_RE = re.compile(r"^results_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.json$")


@dataclass(frozen=True, slots=True)
class SampleRecord:
    """One scored item of one task under one filter, as one arm saw it."""

    task: str
    doc_id: int
    filter: str
    metrics: dict[str, float]
    doc_hash: str
    prompt_hash: str
    target: str
    prediction: str
    response: str
    prompt: str
    choices: tuple[str, ...] = ()
    doc: dict | None = None
    """lm-eval's document (its fields, e.g. a passage id for `cluster:`), when it logged one."""
    choice_logliks: tuple[float, ...] = ()
    """Multiple choice: lm-eval's log-likelihood of each choice (the distribution-shift
    analysis compares the arms' choice distributions)."""
    target_hash: str = ""
    """lm-eval's hash of the item's target ("" when the samples file has none)."""
    repeats: int = 1
    """Responses lm-eval logged for the item's generation request (a task's `repeats: k`)."""

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.task, self.doc_id, self.filter)


@dataclass(frozen=True, slots=True)
class ArmSamples:
    """All samples of one arm, plus what lm-eval recorded about the run."""

    source: str
    records: tuple[SampleRecord, ...]
    task_hashes: dict[str, str] = field(default_factory=dict)
    task_versions: dict[str, object] = field(default_factory=dict)
    task_output_types: dict[str, str] = field(default_factory=dict)
    lm_eval_config: dict = field(default_factory=dict)

    def tasks(self) -> list[str]:
        return sorted({r.task for r in self.records})


def _clean(text: str) -> str:
    """Lone surrogates (valid in JSON, not in UTF-8) become U+FFFD, so every output file
    can be written."""
    return _SURROGATES.sub("\ufffd", text)


def _text(value) -> str:
    while isinstance(value, list) and value:
        value = value[0]
    return "" if value is None or value == [] else _clean(str(value))


def _doc_id(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or \
            (isinstance(value, str) and not value.strip().isdigit()):
        raise UserError(f"{where}: doc_id {value!r} is not a whole number.")
    return int(value)


def _metric_value(value, name: str, doc_id: int, where: str) -> float:
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise UserError(f"{where}: doc_id {doc_id}: metric `{name}` is {value!r}, not a "
                        "finite number.")
    return float(value)


def _arguments(raw) -> list[list]:
    """lm-eval 0.4.x writes request arguments as a list of tuples or, newer, as
    {"gen_args_0": {"arg_0": context, "arg_1": continuation-or-kwargs}, ...}."""
    if isinstance(raw, dict):
        def index(name: str) -> int:
            return int(name.rsplit("_", 1)[-1])
        return [[args[k] for k in sorted(args, key=index)] if isinstance(args, dict) else args
                for _, args in sorted(raw.items(), key=lambda kv: index(kv[0]))]
    return list(raw or [])


def _repeats(resps) -> int:
    """How many responses lm-eval logged for an item's one generation request: a task's
    `repeats: k` logs `resps` as [[answer_1, ..., answer_k]]."""
    if isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list):
        return max(1, len(resps[0]))
    return 1


def _record(task: str, raw: dict, where: str) -> SampleRecord:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: a sample must be a JSON object, got {type(raw).__name__}.")
    try:
        doc_id = _doc_id(raw["doc_id"], where)
        metric_names = raw["metrics"]
        if not isinstance(metric_names, list) or not all(isinstance(m, str)
                                                         for m in metric_names):
            raise UserError(f"{where}: doc_id {doc_id}: `metrics` must be a list of metric "
                            f"names, got {metric_names!r}.")
        metrics = {name: _metric_value(raw[name], name, doc_id, where) for name in metric_names}
        for name in ("doc_hash", "prompt_hash"):
            if not isinstance(raw[name], str):
                raise UserError(f"{where}: doc_id {doc_id}: `{name}` must be a string.")
        arguments = _arguments(raw.get("arguments"))
        prompt = _text(arguments[0]) if arguments else ""
        choices: tuple[str, ...] = ()
        scores: list[float] = []
        repeats = 1
        target = raw.get("target")
        filtered = raw.get("filtered_resps") or []
        if len(arguments) > 1 and all(isinstance(a, list) and len(a) == 2
                                      and isinstance(a[1], str) for a in arguments):
            # multiple choice: one loglikelihood request per choice
            choices = tuple(_clean(str(a[1])).strip() for a in arguments)
            try:
                scores = [float(_text(r)) for r in filtered]
            except ValueError:
                raise UserError(f"{where}: doc_id {doc_id}: a log-likelihood in "
                                "`filtered_resps` is not a number.") from None
            if len(scores) != len(choices) or not all(math.isfinite(x) or x == -math.inf
                                                      for x in scores):
                raise UserError(f"{where}: doc_id {doc_id}: `filtered_resps` must hold one "
                                f"log-likelihood per choice ({len(choices)}).")
            prediction = choices[max(range(len(scores)), key=scores.__getitem__)]
            if str(target).isdigit() and 0 <= int(target) < len(choices):
                target = choices[int(target)]
            response = prediction
        else:
            prediction = _text(filtered)
            response = _text(raw.get("resps"))
            repeats = _repeats(raw.get("resps"))
        return SampleRecord(
            task=task, doc_id=doc_id, filter=_clean(str(raw.get("filter", "none"))),
            metrics=metrics, doc_hash=str(raw["doc_hash"]), prompt_hash=str(raw["prompt_hash"]),
            target=_text(target), prediction=prediction.strip(), response=response,
            prompt=prompt, choices=choices,
            doc=raw.get("doc") if isinstance(raw.get("doc"), dict) else None,
            choice_logliks=tuple(scores),
            target_hash=raw["target_hash"] if isinstance(raw.get("target_hash"), str) else "",
            repeats=repeats)
    except KeyError as exc:
        raise UserError(f"{where}: a sample lacks the field {exc.args[0]!r}; is this an lm-eval "
                        "--log_samples file?") from None
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        raise UserError(f"{where}: a malformed sample ({type(exc).__name__}: {exc}).") from None


def _lines(path: Path):
    """(line number, text) of a JSONL file; invalid UTF-8 is bad input naming the line."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, 1):
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError(f"{path}, line {line_no}: not valid UTF-8.") from None


def _one_per_task(root: Path) -> dict[str, Path]:
    """A directory holds one run: a task with several samples files (two runs, a run nested
    in another, two model folders) is ambiguous, and reading the newest would silently
    read the wrong data."""
    files = samples_files(root)
    for task, paths in files.items():
        if len(paths) > 1:
            shown = ", ".join(str(p.relative_to(root)) for p in paths[:4])
            raise UserError(f"{root}: task `{task}` has {len(paths)} samples files ({shown}); "
                            "a directory must hold exactly one lm-eval run. Point at that "
                            "run's own directory.")
    return {task: paths[0] for task, paths in files.items()}


def read_output_dir(directory: str | Path, tasks: list[str] | None = None) -> ArmSamples:
    """Reads an lm-eval output directory (searched recursively); exactly one samples file
    per task, or a UserError naming the candidates."""
    root = Path(directory)
    if not root.is_dir():
        raise UserError(f"{root} is a file; name the lm-eval output directory that holds it."
                        if root.is_file() else f"lm-eval output directory {root} does not exist.")
    files = _one_per_task(root)
    if not files:
        raise UserError(f"{root}: no samples_<task>_<time>.jsonl files; run lm_eval with "
                        "--log_samples --output_path pointing here.")
    if tasks is not None:
        missing = [t for t in tasks if t not in files]
        if missing:
            raise UserError(f"{root}: no samples for task(s) {', '.join(missing)}.")
        files = {t: files[t] for t in tasks}
    records: list[SampleRecord] = []
    for task, path in sorted(files.items()):
        seen: dict[tuple[str, int, str], int] = {}
        for line_no, line in _lines(path):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                raise UserError(f"{path}, line {line_no}: not valid JSON (truncated file?).") \
                    from None
            record = _record(task, raw, f"{path}, line {line_no}")
            if record.key in seen:
                raise UserError(f"{path}, line {line_no}: doc_id {record.doc_id} (filter "
                                f"{record.filter}) appears again (first on line "
                                f"{seen[record.key]}); each item must be logged once.")
            seen[record.key] = line_no
            records.append(record)
    hashes: dict[str, str] = {}
    versions: dict[str, object] = {}
    output_types: dict[str, str] = {}
    lm_eval_config: dict = {}
    for results in sorted(root.rglob("results_*.json")):
        if not _RESULTS_RE.match(results.name):
            continue
        try:
            data = json.loads(results.read_bytes().decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise UserError(f"{results}: not valid UTF-8 JSON (truncated file?).") from None
        if not isinstance(data, dict):
            raise UserError(f"{results}: a results file must be a JSON object, got "
                            f"{type(data).__name__}.")
        for key, target in (("task_hashes", hashes), ("versions", versions)):
            value = data.get(key) or {}
            if not isinstance(value, dict):
                raise UserError(f"{results}: `{key}` must be an object.")
            target.update({str(k): (v if isinstance(v, (str, int, float)) else str(v))
                           for k, v in value.items()})
        configs = data.get("configs") or {}
        for name, cfg in (configs.items() if isinstance(configs, dict) else ()):
            if isinstance(cfg, dict) and isinstance(cfg.get("output_type"), str):
                output_types[name] = cfg["output_type"]
        config = data.get("config")
        lm_eval_config = config if isinstance(config, dict) and config else lm_eval_config
    return ArmSamples(source=str(root), records=tuple(records), task_hashes=hashes,
                      task_versions=versions, task_output_types=output_types,
                      lm_eval_config=lm_eval_config)


PREFERRED_METRICS = ("acc", "exact_match", "acc_norm")


def default_metric(samples: ArmSamples, task: str) -> str:
    """The metric a task is compared on when none is named: acc, exact_match or acc_norm,
    else the first by name."""
    names = next(r.metrics for r in samples.records if r.task == task)
    for preferred in PREFERRED_METRICS:
        if preferred in names:
            return preferred
    return sorted(names)[0]


def outputs_digest(*dirs: Path) -> str:
    """Hash of every lm-eval samples and results file under the directories (name and
    bytes), in a stable order."""
    digest = hashlib.sha256()
    for root in dirs:
        root = Path(root)
        for path in sorted(list(root.rglob("samples_*.jsonl")) + list(root.rglob("results_*.json"))):
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        digest.update(b"\1")
    return digest.hexdigest()[:12]
