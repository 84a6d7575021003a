#!/usr/bin/env bash
# Release decision step: run one `release` command, check its exit code against the
# release.json it wrote, print the verdict and end with the job's result:
#   0 GO: the job passes; 1 NO-GO, 2 bad input, 3 INCONCLUSIVE (a release needs a
#   decision), 4 the command failed: the job fails.
#
# usage: EVALS_REPORTS=DIR examples/ci/release.sh nox -s release -- POLICY [RUN_DIR ...] --reports DIR
#   (the command must write its release folder into $EVALS_REPORTS, default reports)
set -u
if [ $# -eq 0 ]; then
    echo "usage: EVALS_REPORTS=DIR $0 nox -s release -- POLICY [RUN_DIR ...] --reports DIR" >&2
    exit 2
fi
reports=${EVALS_REPORTS:-reports}
mkdir -p "$reports" || exit 4
marker=$(mktemp "$reports/.release-started.XXXXXX") || exit 4
"$@"
code=$?
found=$(find "$reports" -mindepth 2 -maxdepth 2 -name release.json -newer "$marker" -print)
rm -f "$marker"
count=$(printf '%s' "$found" | grep -c .)
release_dir=""
if [ "$count" -eq 0 ]; then
    case $code in
        2|4) ;;  # bad input or a failure: the suite said why on stderr
        *) echo "release: \`$*\` exited $code but wrote no release.json into $reports (did" \
                "nox fail to build its virtualenv?); counted as a failure, exit 4" >&2
           code=4 ;;
    esac
elif [ "$count" -gt 1 ]; then
    echo "release: \`$*\` wrote $count releases into $reports; expected one" >&2
    code=4
else
    release_dir=$(dirname "$found")
    recorded=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["exit_code"], d["verdict"])' "$found") || recorded="?"
    if [ "${recorded%% *}" != "$code" ]; then
        echo "release: \`$*\` exited $code but $found says '$recorded'; counted as a" \
             "failure, exit 4" >&2
        code=4
    fi
fi
case $code in
    0) verdict=GO ;;
    1) verdict=NO-GO ;;
    2) verdict=BAD_INPUT ;;
    3) verdict=INCONCLUSIVE ;;
    *) verdict=FAILED; code=4 ;;
esac
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'verdict=%s\nexit_code=%s\nrelease_dir=%s\n' "$verdict" "$code" "$release_dir" \
        >> "$GITHUB_OUTPUT"
fi
echo "release: $verdict (exit $code)"
exit "$code"
