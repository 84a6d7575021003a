"""`python -m evals plan` reports the planner's numbers: items and MDE of the exact
McNemar test (checked against an independent enumeration of its power), with Connor's
(1987) normal approximation beside them (checked against the closed form)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from reference_power import exact_mcnemar_power
from scipy.stats import norm

REPO = Path(__file__).resolve().parents[2]


def connor_items(drop: float, discordance: float, alpha: float, power: float) -> int:
    za, zb = norm.isf(alpha), norm.isf(1 - power)
    return math.ceil(((za * math.sqrt(discordance) + zb * math.sqrt(discordance - drop**2))
                      / drop) ** 2)


def test_plan_prints_items_needed_and_mde():
    result = subprocess.run([sys.executable, "-m", "evals", "plan", "--discordance", "0.06",
                             "--drop", "0.03", "--items", "1500"], capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    expected = connor_items(0.03, 0.06, 0.05, 0.8)
    assert f"Connor's normal approximation says {expected})" in result.stdout
    assert "with 1500 items the minimum detectable drop is" in result.stdout


def _plan(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "evals", "plan", *args], capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_plan_items_are_the_exact_tests():
    out = _plan("--discordance", "0.05", "--drop", "0.02")
    assert "to detect a drop of 2.0 pts: 833 items (exact McNemar test" in out
    assert "normal approximation says 771" in out
    # 833 reaches 80% power by enumeration of every outcome; 832 does not
    p_down, p_up = (0.05 + 0.02) / 2, (0.05 - 0.02) / 2
    assert exact_mcnemar_power(833, p_down, p_up, 0.05) >= 0.8
    assert exact_mcnemar_power(832, p_down, p_up, 0.05) < 0.8


def test_plan_mde_is_the_exact_tests():
    out = _plan("--discordance", "0.05", "--items", "1200")
    assert "with 1200 items the minimum detectable drop is 1.66 pts (exact McNemar test)" in out

    def power(drop):
        return exact_mcnemar_power(1200, (0.05 + drop) / 2, (0.05 - drop) / 2, 0.05)

    assert power(0.01664) >= 0.8 > power(0.0166)


def test_plan_without_a_question_is_bad_input():
    result = subprocess.run([sys.executable, "-m", "evals", "plan", "--discordance", "0.06"],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2 and "needs --drop, --margin or --items" in result.stderr
