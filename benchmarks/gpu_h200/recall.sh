#!/usr/bin/env bash
# Issue 54 on the GPU machine: the needle-recall A/B (prefix caching + MTP vs prefix caching
# off) and the 2x2 study for each trigger geometry (configs/gpu/recall_b*.yaml), each with
# async scheduling on (as configured) and off, then every run's exercise counters per task
# and wave (prefix-cache hits and queries, MTP drafts) in one table. Not run on CPU.
#   bash benchmarks/gpu_h200/recall.sh [BLOCK ...]      # default: 128 192 256
#   bash benchmarks/gpu_h200/recall.sh run CONFIG true|false   # one config, async on or off
#   bash benchmarks/gpu_h200/recall.sh counters                 # the counters table only
#   bash benchmarks/gpu_h200/recall.sh run configs/gpu/study_recall_many_b128.yaml true
#     (the 2x2 on the many-manual tasks: about 800 s on a fresh H100, so two device calls;
#     the second resumes the finished arms)
# (one run at a time fits the device's 600-second calls; the state carries over)
# Results under $STATE (default /tmp/recall-state): reports-recall/, logs/, counters.md;
# copy them to benchmarks/results/<session>/ with the versions the runs recorded.
# The model is models/tiny-hybrid-recall (MODEL= to change it), trained by
# benchmarks/gpu_h200/recall_train.sh (one device call) when not committed; every config runs
# as an `extends:` variant naming that model. The geometry check stops a run whose resolved
# geometry cannot trigger (exit 2) before any item runs.
set -u
STATE="${STATE:-/tmp/recall-state}"
mkdir -p "$STATE/logs" "$STATE/configs"
repo="$(pwd)"
MODEL="${MODEL:-$repo/models/tiny-hybrid-recall}"
if [ ! -f "$MODEL/model.safetensors" ] && [ "${1:-}" != counters ]; then
  echo "no recalling model at $MODEL: train it first (bash benchmarks/gpu_h200/recall_train.sh)"
  exit 2
fi

variant() {  # CONFIG ASYNC(true|false): the config on $MODEL, async scheduling as given
  local src="$1" async="$2" suffix=""
  [ "$async" = false ] && suffix="-sync"
  local out="$STATE/configs/$(basename "${src%.yaml}")$suffix.yaml" name
  name="$(sed -n 's/^name: //p' "$src")"
  printf 'extends: %s\nname: %s%s\nmodel: %s\narm_defaults:\n  engine: {async_scheduling: %s}\n' \
    "$repo/$src" "$name" "$suffix" "$MODEL" "$async" > "$out"
  echo "$out"
}

run_one() {  # CONFIG ASYNC
  local variant extra=() log
  variant="$(variant "$1" "$2")"
  case "$1" in *study_*) extra=(--parallel 2 --arms-per-gpu 2) ;; esac
  log="$STATE/logs/$(basename "${variant%.yaml}").log"
  python -m evals ab "$variant" "${extra[@]}" --reports "$STATE/reports-recall" \
    --store "$STATE/store-recall" > "$log" 2>&1
  local code=$?  # before any expansion below resets $?
  echo "$(basename "$variant"): exit $code ($(grep -m1 '^VERDICT' "$log" || tail -1 "$log"))"
}

counters() {
  python benchmarks/gpu_h200/recall_counters.py "$STATE/reports-recall" > "$STATE/counters.md"
  cat "$STATE/counters.md"
}

case "${1:-}" in
  run) run_one "$2" "$3"; counters; exit 0 ;;
  counters) counters; exit 0 ;;
esac
blocks=("$@")
[ ${#blocks[@]} -eq 0 ] && blocks=(128 192 256)
for block in "${blocks[@]}"; do
  for config in "configs/gpu/recall_b$block.yaml" "configs/gpu/study_recall_b$block.yaml"; do
    run_one "$config" true
    run_one "$config" false
  done
done
counters
