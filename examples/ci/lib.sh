# Shell functions of the CI examples, sourced by gate.sh and drift.sh (not run on its own).
#
# The suite's exit codes: 0 PASS, 1 REGRESSION, 2 bad input, 3 INCONCLUSIVE, 4 a run failed.
# A CI job must not read nox's own failure (exit 1 when it cannot build its virtualenv) as
# a REGRESSION, so evals_run checks the command's code against the summary.json (a study:
# study.json) the run wrote, through `nox -s gate-config`, which prints its one-line verdict.

# evals_run REPORTS_DIR COMMAND...
#   Runs COMMAND, which writes its run directory into REPORTS_DIR. Sets EVALS_RUN_DIR to
#   that directory (empty when the command wrote none) and returns the run's exit code;
#   4 when the command's code and its summary disagree or a verdict code came without one.
evals_run() {
    local reports=$1 marker code found count line summary_code
    shift
    mkdir -p "$reports" || return 4
    marker=$(mktemp "$reports/.gate-started.XXXXXX") || return 4
    "$@"
    code=$?
    EVALS_RUN_DIR=""
    # a two-arm run writes summary.json, a study (several arms) study.json
    found=$(find "$reports" -mindepth 2 -maxdepth 2 \( -name summary.json -o -name study.json \) \
        -newer "$marker" -print)
    rm -f "$marker"
    count=$(printf '%s' "$found" | grep -c .)
    if [ "$count" -eq 0 ]; then
        case $code in
            2|4) ;;  # bad input or a failed run: the suite said why on stderr
            *) echo "gate: \`$*\` exited $code but wrote no run into $reports (did nox fail" \
                    "to build its virtualenv?); counted as a failed run, exit 4" >&2
               code=4 ;;
        esac
        return "$code"
    fi
    if [ "$count" -gt 1 ]; then
        echo "gate: \`$*\` wrote $count runs into $reports; expected one (give each job its" \
             "own reports directory); counted as a failed run, exit 4" >&2
        return 4
    fi
    EVALS_RUN_DIR=$(dirname "$found")
    line=$(nox -s gate-config -- "$EVALS_RUN_DIR")
    summary_code=$?
    case $summary_code in
        0|1|3) ;;
        *) echo "gate: could not read the verdict of $EVALS_RUN_DIR (gate-config exit" \
                "$summary_code); counted as a failed run, exit 4" >&2
           return 4 ;;
    esac
    echo "$line"
    if [ "$code" -ne "$summary_code" ]; then
        echo "gate: \`$*\` exited $code but its run says exit $summary_code; counted as a" \
             "failed run, exit 4" >&2
        return 4
    fi
    return "$code"
}

# evals_conclude CODE
#   The job's result. Writes verdict, exit_code and run_dir to $GITHUB_OUTPUT (when set)
#   and returns CODE, except INCONCLUSIVE (3): "needs review", returned as
#   $EVALS_INCONCLUSIVE_EXIT (default 3; GitLab's `allow_failure: exit_codes: [3]` shows
#   it as passed with warnings, the GitHub examples set 0 and label the pull request).
evals_conclude() {
    local code=$1 verdict
    case $code in
        0) verdict=PASS ;;
        1) verdict=REGRESSION ;;
        2) verdict=BAD_INPUT ;;
        3) verdict=INCONCLUSIVE ;;
        *) verdict=RUN_FAILED; code=4 ;;
    esac
    if [ -n "${GITHUB_OUTPUT:-}" ]; then
        printf 'verdict=%s\nexit_code=%s\nrun_dir=%s\n' "$verdict" "$code" \
            "${EVALS_RUN_DIR:-}" >> "$GITHUB_OUTPUT"
    fi
    echo "gate: $verdict (exit $code)"
    if [ "$code" -eq 3 ]; then
        local review=${EVALS_INCONCLUSIVE_EXIT:-3}
        case $review in
            [0-9]|[0-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]) ;;
            *) echo "gate: EVALS_INCONCLUSIVE_EXIT must be an exit code (0-255), got" \
                    "'$review'" >&2
               return 2 ;;
        esac
        echo "gate: INCONCLUSIVE needs review: the data cannot decide (see the report's" \
             "minimum detectable effect); job exit $review"
        return "$review"
    fi
    return "$code"
}
