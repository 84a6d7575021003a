#!/usr/bin/env bash
# Issue 54 on the GPU machine: the needle-recall A/B (prefix caching + MTP vs prefix caching
# off) and the 2x2 study for each trigger geometry (configs/gpu/recall_b*.yaml), each with
# async scheduling on (as configured) and off, then every run's exercise counters per task
# and wave (prefix-cache hits and queries, MTP drafts) in one table. Not run on CPU.
#   bash benchmarks/gpu_h200/recall.sh [BLOCK ...]      # default: 128 192 256
# Results under $STATE (default /tmp/recall-state): reports-recall/, logs/, counters.md;
# copy them to benchmarks/results/<session>/ with the versions the runs recorded.
# models/tiny-hybrid must be a build that recalls (docs/recall.md); the geometry check stops
# a run whose resolved geometry cannot trigger (exit 2) before any item runs.
set -u
STATE="${STATE:-/tmp/recall-state}"
mkdir -p "$STATE/logs" "$STATE/configs"
blocks=("$@")
[ ${#blocks[@]} -eq 0 ] && blocks=(128 192 256)
repo="$(pwd)"

sync_variant() {  # the config with async scheduling off, beside the original
  local src="$1" out="$STATE/configs/$(basename "${1%.yaml}")_sync.yaml"
  local name
  name="$(sed -n 's/^name: //p' "$src")"
  printf 'extends: %s\nname: %s-sync\narm_defaults:\n  engine: {async_scheduling: false}\n' \
    "$repo/$src" "$name" > "$out"
  echo "$out"
}

for block in "${blocks[@]}"; do
  for config in "configs/gpu/recall_b$block.yaml" "configs/gpu/study_recall_b$block.yaml"; do
    extra=()
    case "$config" in *study_*) extra=(--parallel 2 --arms-per-gpu 2) ;; esac
    for variant in "$config" "$(sync_variant "$config")"; do
      log="$STATE/logs/$(basename "${variant%.yaml}").log"
      python -m evals ab "$variant" "${extra[@]}" --reports "$STATE/reports-recall" \
        --store "$STATE/store-recall" > "$log" 2>&1
      echo "$(basename "$variant"): exit $? ($(grep -m1 '^VERDICT' "$log" || tail -1 "$log"))"
    done
  done
done
python benchmarks/gpu_h200/recall_counters.py "$STATE/reports-recall" > "$STATE/counters.md"
cat "$STATE/counters.md"
