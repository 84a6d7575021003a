"""The release policy (`python -m evals release POLICY.yaml`): which benchmarks judge a
release, in which tier, at which margin, and what evidence counts.

YAML, loaded safely (a key given twice is an error), validated: an unknown key, a benchmark
in two tiers, a margin outside (0, 1) is one message naming the file and the key path.
The tiers are NeMo Evaluator's (`nel gate`): critical, supporting, advisory; which of them
block is the policy's choice (`blocking`, default: critical). The evidence rules say which
runs may speak for the release; the decision itself is evals.decide.release.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evals.errors import UserError

TIERS = ("critical", "supporting", "advisory")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _share(value: float | None, key: str) -> float | None:
    if value is not None and not 0.0 < value < 1.0:
        raise ValueError(f"{key} must lie strictly between 0 and 1 (a share: 0.02 = 2 points), "
                         f"got {value!r}")
    return value


class Margins(_Strict):
    """A benchmark's non-inferiority margin: absolute (`margin`, accuracy units) and/or
    relative to the baseline's mean (`relative_margin`); with both, the smaller one counts,
    so a benchmark at 5% baseline accuracy is judged on its relative drop too."""

    margin: float | None = Field(None, description="Largest tolerated drop, accuracy units "
                                 "(0.02 = 2 points).")
    relative_margin: float | None = Field(None, description="Largest tolerated drop as a share "
                                          "of the baseline's mean (0.1 = 10% of it).")

    @field_validator("margin")
    @classmethod
    def _margin(cls, v):
        return _share(v, "margin")

    @field_validator("relative_margin")
    @classmethod
    def _relative(cls, v):
        return _share(v, "relative_margin")


class Benchmark(Margins):
    """One benchmark: an lm-eval task, optionally one metric of it."""

    task: str = Field(min_length=1, description="The lm-eval task name.")
    metric: str | None = Field(None, description="The metric (default: the one the run "
                               "compared).")

    @property
    def name(self) -> str:
        return f"{self.task}:{self.metric}" if self.metric else self.task


class Tiers(_Strict):
    critical: tuple[Benchmark, ...] = ()
    supporting: tuple[Benchmark, ...] = ()
    advisory: tuple[Benchmark, ...] = ()


class Evidence(_Strict):
    """What a run must be to speak for the release; a run that is not is MISMATCHED (or
    STALE, for `max_age_days`)."""

    config_hash: str | None = Field(None, pattern=r"^[0-9a-f]{8}$", description="The config "
                                    "hash `ab` ends its run ids with (8 hex digits).")
    deployment: str | None = Field(None, min_length=1, description="The deployment the run "
                                   "store records the run under (default: the config's name).")
    vllm: str | None = Field(None, min_length=1, description="The vLLM release of the candidate "
                             "arm: `0.26.0`, or `0.26` for any 0.26.x.")
    hardware: str | None = Field(None, min_length=1, description="A hardware class, found "
                                 "(case-insensitively) in the run's platform: `H200`, "
                                 "`AVX-512`.")
    max_age_days: float | None = Field(None, gt=0, description="Older runs are STALE.")
    exercised: bool = Field(False, description="The run's exercise evidence must show every "
                            "declared optimization engaged.")


class ReleasePolicy(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,80}$", description="The release's name "
                      "(its id and output folder).")
    alpha: float = Field(0.05, gt=0, lt=0.5, description="One-sided significance level.")
    correction: Literal["holm", "none"] = Field("holm", description="Multiplicity control "
                                                "over the blocking benchmarks' regression tests.")
    blocking: tuple[Literal["critical", "supporting", "advisory"], ...] = Field(
        ("critical",), description="The tiers whose benchmarks can block the release.")
    defaults: Margins = Field(Margins(margin=0.03), description="Margins of a benchmark that "
                              "sets none.")
    evidence: Evidence = Field(Evidence(), description="What a run must be to count.")
    tiers: Tiers
    source: str = ""

    def benchmarks(self) -> list[tuple[str, Benchmark]]:
        """(tier, benchmark) in tier order."""
        return [(tier, b) for tier in TIERS for b in getattr(self.tiers, tier)]

    def margins(self, benchmark: Benchmark) -> Margins:
        if benchmark.margin is None and benchmark.relative_margin is None:
            return self.defaults
        return Margins(margin=benchmark.margin, relative_margin=benchmark.relative_margin)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key `{key}` is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _message(path: Path, error: dict) -> str:
    loc = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"{path}: unknown key `{loc}`."
    if error["type"] == "missing":
        return f"{path}: missing required key `{loc}`."
    message = error["msg"].removeprefix("Value error, ")
    return f"{path}: `{loc}`: {message} (got {error.get('input')!r})."


def _expand(data: dict) -> dict:
    """A bare task name in a tier is shorthand for {task: NAME}."""
    tiers = data.get("tiers")
    if isinstance(tiers, dict):
        data = {**data, "tiers": {
            tier: [{"task": b} if isinstance(b, str) else b for b in entries]
            if isinstance(entries, list) else entries for tier, entries in tiers.items()}}
    return data


def parse_policy(data: object, path: Path) -> ReleasePolicy:
    if not isinstance(data, dict):
        raise UserError(f"{path}: the top level must be a mapping of keys, not "
                        f"{type(data).__name__}.")
    if "source" in data:
        raise UserError(f"{path}: unknown key `source`.")
    try:
        policy = ReleasePolicy.model_validate({**_expand(data), "source": str(path)})
    except ValidationError as exc:
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        raise UserError(_message(path, errors[0])) from None
    seen: list[tuple[Benchmark, str]] = []
    for tier, benchmark in policy.benchmarks():
        # a task named bare covers every metric of it, so it overlaps any task:metric entry
        clash = next((where for other, where in seen if other.task == benchmark.task and (
            other.metric is None or benchmark.metric is None
            or other.metric == benchmark.metric)), None)
        if clash:
            raise UserError(f"{path}: `tiers.{tier}`: benchmark `{benchmark.name}` is already "
                            f"listed in {clash}; a benchmark belongs to one tier.")
        seen.append((benchmark, f"`tiers.{tier}`"))
    if not any(getattr(policy.tiers, t) for t in policy.blocking):
        raise UserError(f"{path}: `blocking`: no benchmark is in a blocking tier "
                        f"({', '.join(policy.blocking)}); such a policy could never say NO-GO.")
    if len(set(policy.blocking)) != len(policy.blocking):
        raise UserError(f"{path}: `blocking` names a tier twice.")
    if policy.defaults.margin is None and policy.defaults.relative_margin is None:
        raise UserError(f"{path}: `defaults`: give `margin` and/or `relative_margin` (the "
                        "margins of a benchmark that sets none).")
    ev = policy.evidence
    if ev.config_hash and ev.deployment:
        raise UserError(f"{path}: `evidence`: give `config_hash` or `deployment`, not both.")
    return policy


def load_policy(path: str | Path) -> ReleasePolicy:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"policy file {path} does not exist.")
    try:
        data = yaml.load(path.read_bytes().decode("utf-8"), Loader=_UniqueKeyLoader)
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (invalid UTF-8); a policy is YAML.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', exc)}.") \
            from None
    return parse_policy(data, path)
