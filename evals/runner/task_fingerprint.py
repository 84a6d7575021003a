"""What lm-eval loads for a task, hashed: the part of an arm's content key that changes
when a task's definition or data does (issue 50).

For each task (a group or tag: each of its tasks) lm-eval's own index gives the config as
lm-eval sees it, `include` files merged; its hash covers prompts, targets, generation
settings, filters and metric options. Every file of the folder of the task's YAML is
hashed too (the YAML, its `!function` modules and the data files they read, whatever
their names), plus included YAML files elsewhere and local data paths the config names.
A hub dataset counts by the commit its revision resolves to in the local Hugging Face
cache (evals.plan.arm_spec.hub_revision), never by asking the network.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from evals.plan.arm_spec import file_digest, folder_files, hub_revision
from evals.runner.task_index import task_manager


def _short(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()[:16]


class _IgnoreTags(yaml.SafeLoader):
    """Reads a task YAML's `include:` without importing its `!function` modules."""


_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


def _include_chain(path: Path, seen: set[Path]) -> None:
    path = path.resolve()
    if path in seen or not path.is_file():
        return
    seen.add(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_IgnoreTags)  # noqa: S506
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # lm-eval's own loading reports it
    includes = raw.get("include") if isinstance(raw, dict) else None
    for name in includes if isinstance(includes, list) else [includes] if includes else []:
        _include_chain(path.parent / str(name), seen)


def _local_paths(config: dict) -> list[Path]:
    """Local files or folders the config's dataset settings name (`dataset_path`,
    `dataset_kwargs.data_files` / `data_dir`)."""
    kwargs = config.get("dataset_kwargs") if isinstance(config.get("dataset_kwargs"), dict) else {}
    named: list = [config.get("dataset_path"), kwargs.get("data_dir")]
    files = kwargs.get("data_files")
    named += (list(files.values()) if isinstance(files, dict)
              else files if isinstance(files, list) else [files])
    flat = [x for item in named for x in (item if isinstance(item, list) else [item])]
    return [Path(x) for x in flat if isinstance(x, str) and x and Path(x).exists()]


class _Hasher:
    def __init__(self, env: dict | None):
        self.env = env
        self.done: dict[Path, str] = {}

    def path(self, path: Path) -> str:
        """A file's or a whole folder's content hash (each once per call)."""
        path = path.resolve()
        if path not in self.done:
            digest = hashlib.sha256()
            for item in folder_files(path) if path.is_dir() else [path]:
                name = item.relative_to(path) if path.is_dir() else item.name
                digest.update(str(name).encode() + b"\0")
                file_digest(item, digest)
            self.done[path] = digest.hexdigest()[:16]
        return self.done[path]

    def entry(self, config: dict, yaml_path: Path | None) -> dict:
        """Names relative to the task's folder: a moved checkout keeps its keys."""
        files: dict[str, str] = {}
        text = json.dumps(config, sort_keys=True, default=str)
        if yaml_path is not None:
            chain: set[Path] = set()
            _include_chain(Path(yaml_path), chain)
            folder = Path(yaml_path).resolve().parent
            files["<task folder>"] = self.path(folder)
            files.update({p.name: self.path(p) for p in chain if folder not in p.parents})
            # lm-eval writes a `!function` as its absolute path
            text = text.replace(str(folder) + "/", "<task folder>/")
        files.update({f"data:{p.name}": self.path(p) for p in _local_paths(config)})
        data = ""
        dataset = config.get("dataset_path")
        if isinstance(dataset, str) and dataset and not Path(dataset).exists():
            kwargs = config.get("dataset_kwargs") or {}
            revision = kwargs.get("revision") if isinstance(kwargs, dict) else None
            data = f"{dataset}@{hub_revision(dataset, 'datasets', revision, self.env)}"
        return {"config": text, "files": files, "data": data}


def _members(manager, name: str, seen: set[str]) -> list[tuple[str, dict, Path | None]]:
    """(name, config, yaml path) of `name` and, for a group or tag, of everything in it."""
    if name in seen:
        return []
    seen.add(name)
    entry = manager.task_index.get(name)
    if entry is None:
        return [(name, {"unknown task": name}, None)]
    config = entry.cfg if isinstance(entry.cfg, dict) else {}
    found = [(name, config, entry.yaml_path)]
    children = config.get("task") if str(entry.kind).endswith("GROUP") else None
    if str(entry.kind).endswith("TAG"):
        children = sorted(entry.tags)
    for child in children if isinstance(children, list) else []:
        if isinstance(child, str):
            found += _members(manager, child, seen)
        elif isinstance(child, dict):  # an inline task of a group
            found.append((f"{name}/{child.get('task')}", child, entry.yaml_path))
    return found


def task_inputs(tasks: list[str] | tuple[str, ...], include_paths: list[str] | tuple[str, ...],
                env: dict | None = None) -> dict[str, dict[str, str]]:
    """Per task: {"config", "files", "data"}, each a short hash (evals.plan.arm_spec keys
    each task's results by them)."""
    from lm_eval.tasks import TaskManager

    manager = task_manager(TaskManager, include_paths, list(tasks))
    hasher = _Hasher(env)
    out = {}
    for task in tasks:
        parts = [(name, hasher.entry(config, path))
                 for name, config, path in _members(manager, task, set())]
        out[task] = {
            "config": _short(json.dumps([(n, p["config"]) for n, p in parts]).encode()),
            "files": _short(json.dumps([(n, sorted(p["files"].items())) for n, p in parts])
                            .encode()),
            "data": _short(json.dumps([(n, p["data"]) for n, p in parts]).encode()),
        }
    return out
