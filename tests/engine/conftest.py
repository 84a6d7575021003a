"""End-to-end tests on real vLLM engines (CPU) with the shipped tiny model and real lm-eval.

Engines start one at a time (the runner guarantees it). Every offline arm's worker is
forked from a server that has already imported vLLM and lm-eval (`EVALS_FORK_SERVER`,
evals.runner.fork_server): about 10 CPU-seconds less per arm; one test runs its arms as
fresh interpreters, the default. The tests share what they can:
one run store for the session (`EVALS_STORE`), so an arm that an earlier test already ran
with the same content key (model, engine arguments, environment, task, limit, seed) is
reused instead of started again; one item count (`engine_helpers.LIMIT`); one degraded
model; and tests that only read a run's outputs read one shared run. Tests that check
the store itself (reuse, pinning) or need an arm to really run (a kill and resume) pass
their own `--store`.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import ENGINE, MODEL, run_cli, write_config

from evals.runner.fork_server import FORK_SERVER_ENV, stop_servers

ALL_TASKS = [{"name": "tiny_reviews_gen", "metric": "exact_match"},
             {"name": "tiny_reviews_shared_prefix", "metric": "exact_match"},
             {"name": "tiny_reviews_mc", "metric": "acc"},
             {"name": "tiny_addition", "metric": "exact_match"}]
PLAIN = {**ENGINE, "enable_prefix_caching": False}
MTP_PREFIX = {**ENGINE, "enable_prefix_caching": True,
              "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}


@pytest.fixture(scope="session", autouse=True)
def shared_store(tmp_path_factory):
    """The session's run store: every `ab` without `--store` records into it and reuses
    from it."""
    store = tmp_path_factory.mktemp("shared-store")
    patch = pytest.MonkeyPatch()
    patch.setenv("EVALS_STORE", str(store))
    yield store
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def fork_servers(tmp_path_factory):
    """The session's fork servers' folder: every `ab` forks its offline workers from them.
    Under pytest-xdist the workers share one folder (beside their own temporary folders), so
    all the engine streams fork from the same servers and each environment is imported once
    per session, not once per stream (pytest's own variables do not split a server:
    evals.runner.fork_server.is_late). The last worker to end stops them (else they would
    end after IDLE_SECONDS)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if worker else base) / "forks"
    folder.mkdir(exist_ok=True)
    users = folder / "users"  # one file per worker using the servers
    with _folder_lock(folder):
        users.mkdir(exist_ok=True)
        (users / (worker or "main")).touch()
    patch = pytest.MonkeyPatch()
    patch.setenv(FORK_SERVER_ENV, str(folder))
    for name, value in _import_set_env().items():
        if name not in os.environ:
            patch.setenv(name, value)
    yield folder
    patch.undo()
    with _folder_lock(folder):
        (users / (worker or "main")).unlink()
        last = not any(users.iterdir())
    if last:
        stop_servers(folder)


def _import_set_env() -> dict[str, str]:
    """What importing a Transformers model or torch's inductor in a test's own process (the
    LoRA adapter, the degraded model) adds to its environment: scikit-learn's OpenMP
    settings (set with setdefault when it is imported) and torch's inductor cache folder;
    and what importing lm-eval adds (HF_XET_HIGH_PERFORMANCE, with setdefault), which an
    `ab` whose parent imported lm-eval before its arms started passed on to them and one
    that had not did not: the forked model-class probe and the config audit's runs each
    started a fork server of their own for it.
    Set from the session's start, the `ab` commands the tests start inherit one environment
    all session and fork their workers from one server: a variable added halfway would
    start another server (about 12 CPU-seconds of imports) and could put one A/B's two
    arms on two servers."""
    env = {"KMP_DUPLICATE_LIB_OK": "True", "KMP_INIT_AT_FORK": "FALSE",
           "HF_XET_HIGH_PERFORMANCE": "1"}
    try:  # torch's own default, as its inductor sets it
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # another torch: a second server at worst
        return env
    return {**env, "TORCHINDUCTOR_CACHE_DIR": os.path.abspath(default_cache_dir())}


@contextmanager
def _folder_lock(folder: Path):
    with (folder / "users.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def degraded_model(tmp_path_factory):
    """The shipped model with Gaussian noise (0.6 of each matrix's std) added to every
    decoder weight matrix: a real regression, built once per session."""
    import torch
    from safetensors.torch import load_file as load_torch
    from safetensors.torch import save_file as save_torch

    target = tmp_path_factory.mktemp("noisy-model")
    for item in MODEL.iterdir():
        if item.is_file() and item.suffix != ".safetensors":
            (target / item.name).write_bytes(item.read_bytes())
    rng = np.random.default_rng(0)
    tensors = load_torch(str(MODEL / "model.safetensors"))
    for name, tensor in tensors.items():
        if name.endswith("proj.weight") and ".layers." in name:
            noise = rng.normal(0.0, 0.6 * float(tensor.float().std()), tuple(tensor.shape))
            tensors[name] = (tensor.float() + torch.from_numpy(noise).float()).to(tensor.dtype)
    save_torch(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


@pytest.fixture(scope="session")
def mtp_prefix_run(tmp_path_factory, shared_store):
    """The plain engine against prefix caching + MTP on every bundled task: the MTP test
    checks its records, the embedded-model test reads both arms as its `bf16` and
    `mtp_prefix` variants, and later tests reuse its baseline from the store."""
    root = tmp_path_factory.mktemp("mtp-prefix")
    config = write_config(root, "mtp", {"engine": PLAIN}, {"engine": MTP_PREFIX},
                          tasks=ALL_TASKS)
    result = run_cli("ab", str(config), "--reports", str(root / "reports"))
    (run_dir,) = [p.parent for p in (root / "reports").glob("*/summary.json")]
    return result, run_dir
