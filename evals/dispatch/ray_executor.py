"""Arms as Ray tasks (`--executor ray`), for more than one machine (parent side).

Each arm (with `--ray-shard task`: each arm x unfinished task) becomes one Ray task that
asks for the devices its engine needs (GPUs: tensor x pipeline x data parallel size; CPU:
the node's cores split `parallel` ways). The task runs
the ordinary runner (evals.runner.launch.run_arm) in a scratch directory on whichever node
Ray picks, seeded with the arm's finished tasks, and sends the arm's directory back as a
tar archive, which is unpacked into the ordinary run layout (`arms/<arm>/`): pairing,
analysis, reports and resume see no difference. A rerun resumes per task: finished tasks
travel to the node and are not run again.

The config audit runs before the arms are submitted (a Ray task cannot wait for the
parent's go), so bad input still stops the run before any engine starts. `address`:
`ray.init(address=...)` of an existing cluster (e.g. `ray://head:10001` or `auto`);
None starts a local Ray on this machine. Ray is an optional extra (`pip install .[ray]`).
"""

from __future__ import annotations

import io
import json
import os
import socket
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path

from evals.errors import RunFailed, UserError
from evals.plan.arm_spec import ArmSpec
from evals.plan.devices import devices_needed
from evals.runner.layout import ArmLayout

CONNECT_TIMEOUT_S = 60


def _pack(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if directory.is_dir():
            tar.add(str(directory), arcname=".")
    return buffer.getvalue()


def _unpack(blob: bytes, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(str(directory), filter="data")  # no paths outside `directory`


def run_arm_on_node(spec_json: str, seed_archive: bytes, secret_env: dict[str, str]
                    ) -> tuple[bytes, list[str], str | None]:
    """The Ray task: the arm in a scratch directory of this node; its directory back as a
    tar archive, its progress lines, and the failure message if it failed (its finished
    tasks are sent back either way). `secret_env`: the values spec.json holds as markers
    (ArmSpec.secret_env), for the worker's environment only."""
    from evals.runner.launch import run_arm

    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="evals-ray-arm-") as scratch:
        local = Path(scratch) / "arm"
        _unpack(seed_archive, local)
        spec = replace(ArmSpec.from_dict(json.loads(spec_json)), output_dir=str(local),
                       secret_env=secret_env)
        error = None
        try:
            run_arm(spec, echo=lines.append)
        except (RunFailed, UserError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        return _pack(local), lines, error


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A `host:port` (or `ray://host:port`) address must accept a TCP connection within
    `timeout`: `ray.init` itself retries an unreachable address for minutes."""
    if address == "auto":
        return  # Ray reads the local cluster's address file and fails at once without one
    target = address.removeprefix("ray://").rstrip("/")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray-address {address!r}: expected HOST:PORT, ray://HOST:PORT or "
                        "auto.")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise UserError(f"--executor ray: the Ray cluster at {address!r} is unreachable "
                        f"({exc.strerror or exc}); start it (`ray start --head`) or fix the "
                        "address.") from None


def connect(address: str | None):
    """`ray` after `ray.init`; a clear UserError when Ray is missing or the cluster is out
    of reach."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: `pip install -e .[ray]` (or `pip install "
                        "ray`) in the suite's environment.") from None
    if ray.is_initialized():
        return ray
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    if address:
        check_reachable(address)
    try:
        if address:
            ray.init(address=address, namespace="vllm-regression-evals", log_to_driver=False,
                     ignore_reinit_error=True)
        else:  # a local Ray: no dashboard, loopback only
            ray.init(namespace="vllm-regression-evals", include_dashboard=False,
                     log_to_driver=False, ignore_reinit_error=True,
                     _node_ip_address="127.0.0.1")
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
        where = f"the Ray cluster at {address!r}" if address else "a local Ray"
        raise UserError(f"--executor ray: cannot start or reach {where}: "
                        f"{' '.join(str(exc).split())[:300]}") from None
    return ray


def resources_for(spec: ArmSpec, node_cpus: float, parallel: int | None,
                  gpus_total: float) -> dict:
    """What the arm's Ray task asks for: its engine's GPUs on a GPU cluster, else the CPU
    cores of a node split `parallel` ways (default: a whole node per arm, one at a time)."""
    if gpus_total >= 1:
        return {"num_gpus": devices_needed(spec.engine), "num_cpus": 1}
    share = max(1.0, float(int(node_cpus // (parallel or 1))))
    return {"num_cpus": share}


def _shards(spec: ArmSpec, by_task: bool) -> list[tuple[str, ArmSpec]]:
    """The Ray tasks of one arm: the whole arm, or (`by_task`) one per unfinished task, each
    with its own engine, so a large study spreads over more nodes."""
    layout = ArmLayout(Path(spec.output_dir))
    pending = [t for t in spec.tasks if not layout.task_done(t, spec.key_for(t))]
    if not by_task or len(pending) < 2:
        return [(spec.arm, spec)]
    return [(f"{spec.arm}/{task}", replace(spec, tasks=(task,))) for task in pending]


def submit_arms(specs: dict[str, ArmSpec], *, address: str | None, parallel: int | None,
                echo, shard_tasks: bool = False
                ) -> tuple[dict[str, Path], dict[str, str], dict]:
    """Every arm as a Ray task (`shard_tasks`: every arm x unfinished task); returns each
    finished arm's directory, each failed arm's message, and the record of where each ran.
    Each shard's outputs are unpacked into its arm's directory as they come back."""
    ray = connect(address)
    total = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    node_cpus = min((n["Resources"].get("CPU", 1) for n in nodes), default=1)
    remote = ray.remote(max_retries=0)(run_arm_on_node)
    futures = []
    record: dict = {"executor": "ray", "address": address or "local",
                    "cluster": {k: total[k] for k in ("CPU", "GPU") if k in total},
                    "shards": "task" if shard_tasks else "arm", "arms": {}}
    for name, spec in specs.items():
        resources = resources_for(spec, node_cpus, parallel, total.get("GPU", 0))
        if resources.get("num_gpus", 0) > total.get("GPU", 0):
            raise UserError(f"arm `{name}` needs {resources['num_gpus']} GPUs but the Ray "
                            f"cluster has {total.get('GPU', 0):g}.")
        record["arms"][name] = resources
        seed = _pack(Path(spec.output_dir))
        for label, shard in _shards(spec, shard_tasks):
            echo(f"[evals] {label}: submitted to Ray "
                 f"({', '.join(f'{k} {v:g}' for k, v in resources.items())})")
            futures.append((name, label, remote.options(**resources).remote(
                shard.to_json(), seed, shard.secret_env)))
    failed: dict[str, str] = {}
    for name, label, future in futures:
        try:
            archive, lines, error = ray.get(future)
        except Exception as exc:  # the task or its node died: nothing came back
            failed[name] = f"`{label}`: the Ray task failed: {' '.join(str(exc).split())[:500]}"
            continue
        for line in lines:
            echo(line)
        out = Path(specs[name].output_dir)
        _unpack(archive, out)
        (out / "spec.json").write_text(specs[name].to_json() + "\n", encoding="utf-8")
        if error and error.startswith("UserError: "):
            raise UserError(error.removeprefix("UserError: "))
        if error:
            failed[name] = error.removeprefix("RunFailed: ")
    done = {name: Path(spec.output_dir) for name, spec in specs.items() if name not in failed}
    return done, failed, record
