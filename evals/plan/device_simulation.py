"""A study's wall time when its arms run side by side, simulated with the launcher's own
`Scheduler` (evals.plan.devices) from each arm's duration (engine start plus its tasks).

The simulation assumes that arms on disjoint devices do not slow each other down; shared
disks (weights loading) and host CPUs (compilation) can make that optimistic. A plan with
`arms_per_gpu` K > 1 (plan_device_sets) is simulated the same way, its arms sharing a GPU
each for the duration given: use durations measured with the arms sharing, as the arms on
one GPU share its compute.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass

from evals.plan.devices import DevicePlan, Scheduler


@dataclass(frozen=True, slots=True)
class ArmTiming:
    arm: str
    start: float
    end: float
    devices: tuple


@dataclass(frozen=True, slots=True)
class SimulationResult:
    arms: tuple[ArmTiming, ...]
    """In start order."""
    makespan: float
    """Wall time from the first start to the last end."""
    sequential: float
    """Wall time of the arms one after another: the sum of their durations."""

    @property
    def ratio(self) -> float:
        """makespan / sequential (1.0: no gain; 0.25: four times faster)."""
        return self.makespan / self.sequential if self.sequential else 1.0


def simulate(plan: DevicePlan, durations: Mapping[str, float]) -> SimulationResult:
    """Event-driven run of `plan`'s scheduler: arms start when it says so and end after
    their duration; arms ending at the same moment free their devices together."""
    names = {d.name for d in plan.demands}
    if set(durations) != names:
        raise ValueError(f"durations must name exactly the plan's arms: missing "
                         f"{sorted(names - set(durations))}, unknown {sorted(set(durations) - names)}.")
    for arm, seconds in durations.items():
        if isinstance(seconds, bool) or not (isinstance(seconds, (int, float))
                                             and math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"duration of arm {arm!r} must be a finite number >= 0, got {seconds!r}.")
    durations = {arm: float(seconds) for arm, seconds in durations.items()}
    scheduler = Scheduler(plan)
    now, ends, timings = 0.0, [], {}
    while True:
        for started in iter(scheduler.next_to_start, None):
            timings[started.arm] = ArmTiming(started.arm, now, now + durations[started.arm],
                                             started.devices)
            heapq.heappush(ends, (now + durations[started.arm], started.order, started.arm))
        if not ends:
            break
        now = ends[0][0]
        while ends and ends[0][0] == now:
            scheduler.finish(heapq.heappop(ends)[2])
    if not scheduler.done:  # cannot happen for a plan from plan_device_sets
        raise RuntimeError("the scheduler left arms waiting with nothing running.")
    arms = tuple(timings[a.arm] for a in scheduler.started)
    return SimulationResult(arms, max(t.end for t in arms), float(sum(durations.values())))
