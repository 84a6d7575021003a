"""`python -m evals plan` reports the planner's numbers (checked against an independent
normal-approximation formula for the paired design, Connor 1987)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

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
    assert f"to detect a drop of 3.0 pts: {expected} items" in result.stdout
    assert "with 1500 items the minimum detectable drop is" in result.stdout


def test_plan_without_a_question_is_bad_input():
    result = subprocess.run([sys.executable, "-m", "evals", "plan", "--discordance", "0.06"],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2 and "needs --drop, --margin or --items" in result.stderr
