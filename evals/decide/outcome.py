"""What a reader of a finished run needs from the decision: `Verdict`, the three outcomes
of a comparison with the exit code of each, and `DRIFT_KIND`, the `kind` a drift run
records (evals.decide.drift).

Apart from evals.decide.verdict and evals.decide.drift (which decide and need scipy) so
that the readers of a finished run - `gate-config`, `report`, `history`, the CI outputs -
import no statistics (about a second of every such command).
"""

from __future__ import annotations

from enum import Enum

from evals.errors import ExitCode

DRIFT_KIND = "drift"


class Verdict(str, Enum):
    PASS = "PASS"
    REGRESSION = "REGRESSION"
    INCONCLUSIVE = "INCONCLUSIVE"

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode[self.value]
