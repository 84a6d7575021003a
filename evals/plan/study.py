"""A study: more than two arms, one of them the baseline, or a factorial design.

Two forms, both in the ordinary config file (`extends`, `arm_defaults`, tasks, gate...):

* `arms:` with more than two entries (one named `baseline`, or `baseline: NAME`);
* `factorial:` - factors, each a mapping of levels to engine-argument settings, e.g.

      factorial:
        prefix_caching: {off: {enable_prefix_caching: false}, on: {enable_prefix_caching: true}}
        decoding: {plain: {}, mtp: {speculative_config: {method: mtp, num_speculative_tokens: 1}}}

  expanded into every combination. A factor's first level is its reference; the arm with
  every factor at its reference is `baseline`, the others are named by the levels that
  differ from it (`prefix_caching=on`, `prefix_caching=on+decoding=mtp`). Each arm is
  `arm_defaults` with its levels' engine arguments merged in; `intended_change` of each
  comparison is derived from the factors it changes.

Every other arm is compared with the baseline as an ordinary two-arm comparison: a study
holds one `ABConfig` per non-baseline arm, so everything a two-arm config is checked for
is checked for each comparison.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from evals.errors import UserError
from evals.plan.config import (ABConfig, _deep_merge, apply_arm_defaults, config_from_data,
                               is_study, read_config_data)

ARM_NAME = re.compile(r"^[A-Za-z0-9_.+=-]+$")
RESERVED_ARMS = ("candidate", "baseline_rerun")  # names the two-arm layout uses itself
UNSUPPORTED = {  # two-arm options a study does not run (yet), and why
    "sequential": "early stop is decided per two-arm comparison",
    "noise_floor": "the A/A noise floor reruns the two-arm baseline",
    "speed": "the load sweep compares two server arms",
}


@dataclass(frozen=True)
class Cell:
    """One 2x2 of a factorial study: the arms of factor `first` x factor `second` with
    every other factor at its reference level (evals.analyse.interaction)."""

    first: str
    first_level: str
    second: str
    second_level: str
    neither: str
    first_only: str
    second_only: str
    both: str


@dataclass(frozen=True)
class Study:
    source: str
    name: str
    baseline: str
    arms: tuple[str, ...]
    """Every arm, the baseline first, then in the config's (or the factors') order."""
    comparisons: dict[str, ABConfig]
    """Each non-baseline arm: the two-arm config `baseline` vs that arm as `candidate`."""
    levels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Factorial studies: each arm's level of each factor."""
    factors: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def settings(self) -> ABConfig:
        """The settings every comparison shares (tasks, limit, seed, gate...)."""
        return next(iter(self.comparisons.values()))

    @property
    def candidates(self) -> tuple[str, ...]:
        return self.arms[1:]

    def cells(self) -> list[Cell]:
        """Every 2x2 of the design: each pair of factors, each pair of non-reference levels."""
        by_levels = {tuple(sorted(levels.items())): arm for arm, levels in self.levels.items()}
        reference = {f: levels[0] for f, levels in self.factors.items()}

        def arm(**changed: str) -> str:
            return by_levels[tuple(sorted({**reference, **changed}.items()))]

        cells = []
        for f, g in itertools.combinations(self.factors, 2):
            for lf, lg in itertools.product(self.factors[f][1:], self.factors[g][1:]):
                cells.append(Cell(f, lf, g, lg, neither=self.baseline,
                                  first_only=arm(**{f: lf}), second_only=arm(**{g: lg}),
                                  both=arm(**{f: lf, g: lg})))
        return cells

    def run_id(self) -> str:
        blob = json.dumps({arm: c.model_dump(mode="json", exclude={"source", "description"})
                           for arm, c in self.comparisons.items()}, sort_keys=True).encode()
        return f"{self.name}-{hashlib.sha256(blob).hexdigest()[:8]}"


def _arm_name(levels: dict[str, str], factors: dict[str, list[str]]) -> str:
    changed = [f"{f}={level}" for f, level in levels.items() if level != factors[f][0]]
    return "+".join(changed) or "baseline"


def _level_name(level) -> str:
    """YAML 1.1 reads `on`/`off`/`yes`/`no` as booleans; a level named so keeps its name."""
    if isinstance(level, bool):
        return "on" if level else "off"
    return str(level)


def _expand_factorial(data: dict, source: Path) -> tuple[dict, dict, dict, dict]:
    """The factorial's arms (settings), each arm's levels, the factors' levels, and each
    arm's intended change (engine arguments of the factors it changes)."""
    factorial = data["factorial"]
    if "arms" in data:
        raise UserError(f"{source}: `factorial` and `arms` cannot both be given; settings "
                        "every arm shares go under `arm_defaults`.")
    if not isinstance(factorial, dict) or len(factorial) < 1:
        raise UserError(f"{source}: `factorial` must map factor names to their levels.")
    factors: dict[str, list[str]] = {}
    keys: dict[str, set[str]] = {}  # factor -> engine arguments its levels set
    settings_of: dict[tuple[str, str], dict] = {}
    for factor, levels in factorial.items():
        where = f"factorial.{factor}"
        if not isinstance(levels, dict) or len(levels) < 2:
            raise UserError(f"{source}: `{where}` must map at least two level names to "
                            "engine-argument settings (the first is the reference).")
        for level, settings in levels.items():
            if not isinstance(settings, dict):
                raise UserError(f"{source}: `{where}.{level}` must be a mapping of engine "
                                f"arguments (use {{}} for none), not {settings!r}.")
            if not ARM_NAME.match(f"{factor}={_level_name(level)}"):
                raise UserError(f"{source}: `{where}.{level}`: factor and level names may use "
                                "letters, digits and _ . - only.")
            settings_of[str(factor), _level_name(level)] = settings
        factors[str(factor)] = [_level_name(level) for level in levels]
        keys[str(factor)] = {k for settings in levels.values() for k in settings}
    for f, g in itertools.combinations(factors, 2):
        shared = sorted(keys[f] & keys[g])
        if shared:
            raise UserError(f"{source}: factors `{f}` and `{g}` both set `{shared[0]}`; each "
                            "engine argument must belong to one factor (otherwise the level "
                            "named last would silently win).")
    defaults = data.get("arm_defaults") or {}
    arms, levels_by_arm, intended = {}, {}, {}
    # the baseline, then arms changing one factor (in the factors' order), then two, ...
    combos = sorted(itertools.product(*factors.values()), key=lambda combo: (
        sum(level != factors[f][0] for f, level in zip(factors, combo)),
        [-(level != factors[f][0]) for f, level in zip(factors, combo)]))
    for combo in combos:
        levels = dict(zip(factors, combo))
        engine: dict = {}
        for factor, level in levels.items():
            engine.update(settings_of[factor, level])
        name = _arm_name(levels, factors)
        arms[name] = _deep_merge(defaults, {"engine": engine})
        levels_by_arm[name] = levels
        intended[name] = sorted(k for f, level in levels.items() if level != factors[f][0]
                                for k in keys[f])
    return arms, levels_by_arm, {f: tuple(v) for f, v in factors.items()}, intended


def study_from_data(data: dict, path: Path) -> Study:
    for key, why in UNSUPPORTED.items():
        if data.get(key):
            raise UserError(f"{path}: `{key}` is not available in a study ({why}); run the "
                            "arms as two-arm configs for it.")
    if (data.get("gate") or {}).get("pooled"):
        raise UserError(f"{path}: `gate.pooled` is not available in a study (its Holm family "
                        "already spans every arm and task).")
    levels: dict = {}
    factors: dict = {}
    intended: dict = {}
    if "factorial" in data:
        arms, levels, factors, intended = _expand_factorial(data, path)
        if data.get("baseline", "baseline") != "baseline":
            raise UserError(f"{path}: in a factorial study the baseline is the arm with every "
                            "factor at its first level; remove `baseline:`.")
        baseline = "baseline"
    else:
        data = apply_arm_defaults(data, path)
        arms = data.get("arms")
        baseline = data.get("baseline", "baseline")
        if not isinstance(arms, dict) or len(arms) < 2:
            raise UserError(f"{path}: `arms` must map at least two arm names to their settings.")
        if not isinstance(baseline, str) or baseline not in arms:
            raise UserError(f"{path}: `baseline: {baseline}` names no arm (arms: "
                            f"{', '.join(map(str, arms))}).")
    for name in arms:
        if not isinstance(name, str) or not ARM_NAME.match(name):
            raise UserError(f"{path}: arm name {name!r}: use letters, digits and _ . + = - only.")
        if name in RESERVED_ARMS:
            raise UserError(f"{path}: `{name}` cannot name an arm of a study (it has a meaning "
                            "of its own in a run's layout); rename it.")
    order = [baseline] + [a for a in arms if a != baseline]
    rest = {k: v for k, v in data.items()
            if k not in ("arms", "baseline", "factorial", "arm_defaults")}
    comparisons = {}
    for arm in order[1:]:
        pair = {**rest, "arms": {"baseline": arms[baseline], "candidate": arms[arm]}}
        if factors and "intended_change" not in rest:
            pair["intended_change"] = intended[arm]
        try:
            comparisons[arm] = config_from_data(pair, path)
        except UserError as exc:  # name the study's arm, not the comparison's placeholder
            message = str(exc).replace("arms.candidate", f"arms.{arm}").replace(
                "arms.baseline", f"arms.{baseline}")
            raise UserError(message) from None
    return Study(source=str(path), name=comparisons[order[1]].name, baseline=baseline,
                 arms=tuple(order), comparisons=comparisons, levels=levels, factors=factors)


def load_run_config(path: str | Path) -> ABConfig | Study:
    """A two-arm config or a study, whichever the file holds."""
    data, path = read_config_data(path)
    return study_from_data(data, path) if is_study(data) else config_from_data(data, path)
