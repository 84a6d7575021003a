"""Reading lm-eval `--log_samples` output directories into our own record types.

Both the suite's own arm runs and a user's plain `lm_eval --log_samples` runs write
the same layout: `<dir>/<model>/samples_<task>_<timestamp>.jsonl` and
`<dir>/<model>/results_<timestamp>.json`. Everything downstream works on
`ArmSamples`, never on lm-eval objects.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from evals.errors import UserError

_SAMPLES_RE = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")
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


def _text(value) -> str:
    while isinstance(value, list) and value:
        value = value[0]
    return "" if value is None or value == [] else str(value)


def _arguments(raw) -> list[list]:
    """lm-eval 0.4.x writes request arguments as a list of tuples or, newer, as
    {"gen_args_0": {"arg_0": context, "arg_1": continuation-or-kwargs}, ...}."""
    if isinstance(raw, dict):
        def index(name: str) -> int:
            return int(name.rsplit("_", 1)[-1])
        return [[args[k] for k in sorted(args, key=index)] if isinstance(args, dict) else args
                for _, args in sorted(raw.items(), key=lambda kv: index(kv[0]))]
    return list(raw or [])


def _record(task: str, raw: dict, where: str) -> SampleRecord:
    try:
        metric_names = raw["metrics"]
        metrics = {}
        for name in metric_names:
            value = raw[name]
            if isinstance(value, bool):
                value = float(value)
            if not isinstance(value, (int, float)) or math.isnan(float(value)):
                raise UserError(f"{where}: doc_id {raw['doc_id']}: metric `{name}` is "
                                f"{value!r}, not a number.")
            metrics[name] = float(value)
        arguments = _arguments(raw.get("arguments"))
        prompt = _text(arguments[0]) if arguments else ""
        choices: tuple[str, ...] = ()
        target = raw.get("target")
        filtered = raw.get("filtered_resps") or []
        if len(arguments) > 1 and all(isinstance(a, list) and len(a) == 2
                                      and isinstance(a[1], str) for a in arguments):
            # multiple choice: one loglikelihood request per choice
            choices = tuple(str(a[1]).strip() for a in arguments)
            scores = [float(_text(r)) for r in filtered]
            prediction = choices[max(range(len(scores)), key=scores.__getitem__)]
            if str(target).isdigit() and 0 <= int(target) < len(choices):
                target = choices[int(target)]
            response = prediction
        else:
            prediction = _text(filtered)
            response = _text(raw.get("resps"))
        return SampleRecord(
            task=task, doc_id=int(raw["doc_id"]), filter=str(raw.get("filter", "none")),
            metrics=metrics, doc_hash=str(raw["doc_hash"]), prompt_hash=str(raw["prompt_hash"]),
            target=_text(target), prediction=prediction.strip(), response=response,
            prompt=prompt, choices=choices,
            doc=raw.get("doc") if isinstance(raw.get("doc"), dict) else None)
    except KeyError as exc:
        raise UserError(f"{where}: a sample lacks the field {exc.args[0]!r}; is this an lm-eval "
                        "--log_samples file?") from None


def _newest_per_task(paths: list[Path]) -> dict[str, Path]:
    newest: dict[str, tuple[str, Path]] = {}
    for path in paths:
        match = _SAMPLES_RE.match(path.name)
        if not match:
            continue
        task, stamp = match["task"], match["stamp"]
        if task not in newest or stamp > newest[task][0]:
            newest[task] = (stamp, path)
    return {task: path for task, (_, path) in newest.items()}


def read_output_dir(directory: str | Path, tasks: list[str] | None = None) -> ArmSamples:
    """Reads an lm-eval output directory (searched recursively); newest file per task wins."""
    root = Path(directory)
    if not root.is_dir():
        raise UserError(f"lm-eval output directory {root} does not exist.")
    files = _newest_per_task(sorted(root.rglob("samples_*.jsonl")))
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
        with path.open(encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError:
                    raise UserError(f"{path}, line {line_no}: not valid JSON (truncated file?).") \
                        from None
                records.append(_record(task, raw, f"{path}, line {line_no}"))
    hashes: dict[str, str] = {}
    versions: dict[str, object] = {}
    output_types: dict[str, str] = {}
    lm_eval_config: dict = {}
    for results in sorted(root.rglob("results_*.json")):
        if not _RESULTS_RE.match(results.name):
            continue
        try:
            data = json.loads(results.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise UserError(f"{results}: not valid JSON (truncated file?).") from None
        hashes.update(data.get("task_hashes") or {})
        versions.update(data.get("versions") or {})
        for name, cfg in (data.get("configs") or {}).items():
            if isinstance(cfg, dict) and "output_type" in cfg:
                output_types[name] = cfg["output_type"]
        lm_eval_config = data.get("config") or lm_eval_config
    return ArmSamples(source=str(root), records=tuple(records), task_hashes=hashes,
                      task_versions=versions, task_output_types=output_types,
                      lm_eval_config=lm_eval_config)
