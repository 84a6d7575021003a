#!/usr/bin/env bash
# Release gate step: run one suite command, check its exit code against the run's
# summary.json, print the one-line verdict and end with the job's result:
#   0 PASS; 1 REGRESSION, 2 bad input, 4 run failed: the job fails;
#   3 INCONCLUSIVE: "needs review", exit $EVALS_INCONCLUSIVE_EXIT (default 3).
#
# usage: EVALS_REPORTS=DIR examples/ci/gate.sh nox -s ab -- CONFIG --reports DIR
#   (the command must write its run into $EVALS_REPORTS, default reports)
set -u
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
if [ $# -eq 0 ]; then
    echo "usage: EVALS_REPORTS=DIR $0 nox -s ab -- CONFIG --reports DIR" >&2
    exit 2
fi
evals_run "${EVALS_REPORTS:-reports}" "$@"
evals_conclude "$?"
