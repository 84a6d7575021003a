#!/usr/bin/env bash
# Weekly drift step: rerun the deployment, compare it with its golden run, chart the drift.
#
# $EVALS_STATE is the directory the CI cache restores before this step and saves after it:
#   store/         the run store (index, manifests, items): what the EWMA chart reads
#   reports/       the run directories (the golden run's arm outputs are the baseline)
#   history.html   the trend page; latest/: this run's report.html, summary.json,
#                  summary.md and junit.xml (the artifacts to publish)
#   golden-run     the pinned golden run's id; location: where this state lives
# The first run (no golden run yet) runs `nox -s ab` and pins it with `nox -s pin`; every
# later run is `nox -s drift`. Each run ends with `nox -s history`.
#
# Environment: EVALS_CONFIG (the deployment's config), EVALS_DEPLOYMENT (its deployment
# name: `drift.deployment`, else `name`), EVALS_STATE (an absolute path, the same on every
# run: the store records run directories by absolute path). The drift run id ends in
# $GITHUB_RUN_ID or $CI_PIPELINE_ID, so a retried job resumes its run.
# Exit codes as examples/ci/gate.sh.
set -u
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

notice() {  # a line in the log, and an annotation on GitHub
    echo "drift: $1"
    if [ "${GITHUB_ACTIONS:-}" = "true" ]; then echo "::warning title=drift state::$1"; fi
}

for name in EVALS_CONFIG EVALS_DEPLOYMENT EVALS_STATE; do
    if [ -z "${!name:-}" ]; then
        echo "error: set $name (see the comment at the top of $0)" >&2
        exit 2
    fi
done
case $EVALS_STATE in
    /*) ;;
    *) echo "error: EVALS_STATE must be an absolute path, got '$EVALS_STATE'" >&2; exit 2 ;;
esac
mkdir -p "$EVALS_STATE" || exit 4
if [ -f "$EVALS_STATE/location" ] && [ "$(cat "$EVALS_STATE/location")" != "$EVALS_STATE" ]; then
    echo "error: the drift state was saved at $(cat "$EVALS_STATE/location") and restored at" \
         "$EVALS_STATE; the run store records run directories by absolute path, so keep" \
         "EVALS_STATE at one path on every run (a fixed runner work folder)" >&2
    exit 2
fi
echo "$EVALS_STATE" > "$EVALS_STATE/location"
export EVALS_STORE="$EVALS_STATE/store"
reports="$EVALS_STATE/reports"

if [ ! -s "$EVALS_STATE/golden-run" ]; then
    notice "no golden run in $EVALS_STATE (first run, or the CI cache was lost): running the A/B and pinning it as the golden run of $EVALS_DEPLOYMENT"
    evals_run "$reports" nox -s ab -- "$EVALS_CONFIG" --reports "$reports"
    code=$?
    if [ -n "$EVALS_RUN_DIR" ]; then
        golden=$(basename "$EVALS_RUN_DIR")
        if nox -s pin -- "$golden" --deployment "$EVALS_DEPLOYMENT"; then
            echo "$golden" > "$EVALS_STATE/golden-run"
        else
            code=2  # the store said why (e.g. EVALS_DEPLOYMENT is not the config's deployment)
        fi
    fi
else
    run_id="$EVALS_DEPLOYMENT-drift-$(date -u +%Y%m%d)-${GITHUB_RUN_ID:-${CI_PIPELINE_ID:-$(date -u +%H%M%S)}}"
    evals_run "$reports" nox -s drift -- "$EVALS_CONFIG" --reports "$reports" --run-id "$run_id"
    code=$?
fi

# this run's reports at a fixed path, for the CI system's artifacts and test report
rm -rf "$EVALS_STATE/latest"
if [ -n "$EVALS_RUN_DIR" ]; then
    mkdir -p "$EVALS_STATE/latest"
    for file in report.html summary.json summary.md junit.xml; do
        if [ -f "$EVALS_RUN_DIR/$file" ]; then cp "$EVALS_RUN_DIR/$file" "$EVALS_STATE/latest/"; fi
    done
fi
if [ -d "$EVALS_STORE" ]; then
    if ! nox -s history -- --deployment "$EVALS_DEPLOYMENT" --out "$EVALS_STATE/history.html"; then
        echo "drift: the trend page failed" >&2
        if [ "$code" -eq 0 ] || [ "$code" -eq 3 ]; then code=4; fi
    fi
fi
evals_conclude "$code"
