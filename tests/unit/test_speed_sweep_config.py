"""`speed:` (the load sweep, issue 55): what a config may ask for, and each bad input as one
line and exit 2, before scipy or an engine loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evals.errors import UserError
from evals.plan.config import SyntheticPrompts, load_config

REPO = Path(__file__).resolve().parents[2]

CONFIG = """
name: t
model: {model}
tasks: [tiny_reviews_gen]
arms:
  baseline: {{mode: {mode}, engine: {{dtype: bfloat16, max_num_seqs: 8}}}}
  candidate: {{mode: server, engine: {{dtype: bfloat16, enable_prefix_caching: true}}}}
speed: {speed}
"""
GOOD = ("{concurrency: [1, 2, 4], requests_per_level: 6, prompts: tiny_reviews_gen, "
        "slo: {ttft_p95_ms: 150}}")


def write(tmp_path: Path, speed: str = GOOD, mode: str = "server") -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(model=tmp_path, mode=mode, speed=speed), encoding="utf-8")
    return path


def test_a_sweep_loads(tmp_path):
    config = load_config(write(tmp_path))
    assert config.speed.concurrency == [1, 2, 4] and config.speed.tokens_per_request() == 64
    assert config.speed.slo.ttft_p95_ms == 150 and config.speed.slo.tpot_p95_ms is None
    synthetic = load_config(write(tmp_path, "{concurrency: [1, 8], requests_per_level: 4, "
                                  "prompts: {input_tokens: 128, output_tokens: 32}}"))
    assert synthetic.speed.prompts == SyntheticPrompts(input_tokens=128, output_tokens=32)
    assert synthetic.speed.tokens_per_request() == 32


BAD = [
    ("{concurrency: [], requests_per_level: 4, prompts: tiny_reviews_gen}",
     "server", "the concurrency list is empty"),
    ("{concurrency: [1, 4, 4], requests_per_level: 4, prompts: tiny_reviews_gen}",
     "server", "must rise strictly, got [1, 4, 4]"),
    ("{concurrency: [4, 2], requests_per_level: 4, prompts: tiny_reviews_gen}",
     "server", "must rise strictly"),
    ("{concurrency: [1, 16], requests_per_level: 4, prompts: tiny_reviews_gen}",
     "server", "level 16 is above arm baseline's max_num_seqs (8)"),
    (GOOD, "offline", "`speed` sweeps server arms only"),
    ("{concurrency: [1], requests_per_level: 4, prompts: other_task}",
     "server", "names task `other_task`, which is not under `tasks`"),
    ("{concurrency: [1], requests_per_level: 4, prompts: t, slo: {}}",
     "server", "give `ttft_p95_ms`, `tpot_p95_ms` or both"),
    ("{concurrency: [1], requests_per_level: 0, prompts: tiny_reviews_gen}",
     "server", "speed.requests_per_level"),
    ("{concurrency: [1], requests_per_level: 4, prompts: tiny_reviews_gen, burst: 3}",
     "server", "unknown key `speed.burst`"),
]


@pytest.mark.parametrize("speed, mode, expected", BAD, ids=[b[2][:30] for b in BAD])
def test_bad_sweeps_are_refused(tmp_path, speed, mode, expected):
    with pytest.raises(UserError) as info:
        load_config(write(tmp_path, speed, mode))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("index", [0, 1, 3, 4])
def test_the_cli_exits_2_with_one_line_before_scipy(tmp_path, index):
    speed, mode, expected = BAD[index]
    path = write(tmp_path, speed, mode)
    probe = ("import sys, runpy; sys.argv = ['evals', 'ab', %r, '--reports', %r]\n"
             "try:\n    runpy.run_module('evals', run_name='__main__')\n"
             "finally:\n    print('scipy loaded' if 'scipy' in sys.modules else 'no scipy')"
             % (str(path), str(tmp_path / "reports")))
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.strip().count("\n") == 0
    assert "no scipy" in result.stdout



def test_a_study_refuses_a_sweep(tmp_path):
    from evals.plan.study import load_run_config

    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nmodel: {tmp_path}\ntasks: [tiny_reviews_gen]\nspeed: {GOOD}\n"
                    "arms:\n  baseline: {mode: server}\n  a: {mode: server}\n"
                    "  b: {mode: server}\n", encoding="utf-8")
    with pytest.raises(UserError, match="`speed` is not available in a study"):
        load_run_config(path)


def _gated(tmp_path, gate: str, speed: str = GOOD) -> Path:
    path = write(tmp_path, speed)
    path.write_text(path.read_text(encoding="utf-8") + f"gate: {{speed: {gate}}}\n",
                    encoding="utf-8")
    return path


def test_gate_speed_loads(tmp_path):
    config = load_config(_gated(tmp_path, "{min_speedup_at: {4: 1.1}, min_slo_concurrency: 2}"))
    assert config.gate.speed.min_speedup_at == {4: 1.1}
    assert config.gate.speed.min_slo_concurrency == 2


@pytest.mark.parametrize("gate, speed, expected", [
    ("{min_speedup_at: {16: 1.1}}", GOOD, "names level 16, which `speed.concurrency` [1, 2, 4]"),
    ("{}", GOOD, "give `min_speedup_at`, `min_slo_concurrency` or both"),
    ("{min_slo_concurrency: 2}", "{concurrency: [1], requests_per_level: 2, "
     "prompts: tiny_reviews_gen}", "needs `speed.slo`"),
    ("{min_speedup_at: {1: 1.1}}", "null", "there is no `speed:` sweep"),
])
def test_bad_speed_gates(tmp_path, gate, speed, expected):
    with pytest.raises(UserError) as info:
        load_config(_gated(tmp_path, gate, speed))
    assert expected in str(info.value)


def test_min_speedup_needs_the_baseline_rerun(tmp_path):
    """`gate.min_speedup` decides on the interval widened by the baseline rerun's own speed
    difference: without `noise_floor: true` there is none, so the config is refused."""
    path = tmp_path / "c.yaml"
    body = ("name: t\nmodel: {model}\ntasks: [tiny_reviews_gen]\n"
            "arms:\n  baseline: {{engine: {{dtype: bfloat16}}}}\n"
            "  candidate: {{engine: {{dtype: bfloat16, enable_prefix_caching: true}}}}\n"
            "gate: {{min_speedup: 1.2}}\n").format(model=tmp_path)
    path.write_text(body, encoding="utf-8")
    with pytest.raises(UserError, match=r"`gate.min_speedup` needs `noise_floor: true`"):
        load_config(path)
    path.write_text(body + "noise_floor: true\n", encoding="utf-8")
    assert load_config(path).gate.min_speedup == 1.2
