#!/usr/bin/env bash
# The GPU machine's steps (the `device` tool's H200, docs/where_it_runs.md "Measured on one H200"), run
# from the repository root there, each step one `run` call:
#   bash benchmarks/gpu_h200/run.sh install [--quick]  # after the wheel parts are in /tmp/g
#   bash benchmarks/gpu_h200/run.sh ab CONFIG [CONFIG ...]
#   bash benchmarks/gpu_h200/run.sh canary CONFIG
#   bash benchmarks/gpu_h200/run.sh overhead CONFIG    # benchmarks/bench_overhead.py, all items
#   bash benchmarks/gpu_h200/run.sh study CONFIG [LIMIT]  # --parallel 1, then 2 arms on one GPU
#   bash benchmarks/gpu_h200/run.sh hybrid-train [SECONDS]  # scripts/build_hybrid.py on the GPU
#   bash benchmarks/gpu_h200/run.sh hybrid-study CONFIG     # 2 arms at a time; a rerun resumes
# STEP_TIMEOUT=SECONDS bounds a step's suite command (default 540: one `run` is 600 s, so an
# install in the same call needs a shorter one); `install --quick` records the versions only.
# A `run` carries at most 64 MiB: the checkout (36.2 MB of tracked files in session 33)
# beside one 30 MiB wheel part is over it; make the parts with `offline_wheels.py .gpu
# --part-mb 25` (or split 40 MiB parts again: `cat .gpu/part-* | split -b 25M -d -a 2 -
# .gpu/s/part-`), and carry one part per call; the install joins every /tmp/g/part-*.
# State (reports, the run store, logs) stays in /tmp/evals-gpu while the machine is warm;
# every step packs what it made into $OUT/<step>.tgz and prints the verdict lines.
set -uo pipefail
STATE=/tmp/evals-gpu
mkdir -p "$STATE/logs" "${OUT:-/tmp/out}"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# `pip install --target` puts the scripts (lm_eval, vllm) in /tmp/site/bin, off PATH
export PATH=/tmp/site/bin:$PATH
# Triton keeps its autotuning results on disk: the hybrid model's GDN and MoE kernels are
# autotuned by the first engine start on a fresh machine (about 5 minutes), and every later
# arm's engine, a new process, reads them back instead of benchmarking every config again
export TRITON_CACHE_AUTOTUNING=1
STEP_TIMEOUT=${STEP_TIMEOUT:-540}
step=$1; shift
started=$(date +%s)
case "$step" in
  install)
    mkdir -p /tmp/g && cp .gpu/part-* /tmp/g/ 2>/dev/null
    bash .gpu/install.sh 2>&1 | tail -3
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site . 2>&1 | tail -3
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$STATE/logs/nvidia-smi.csv"
    cp /proc/cpuinfo "$STATE/logs/cpuinfo.txt"
    python3 -m pip list 2>/dev/null | grep -iE "^(vllm|torch|lm.eval|transformers|flashinfer|triton) " > "$STATE/logs/versions.txt"
    if [ "${1:-}" != "--quick" ]; then
    python3 scripts/record_vllm_api.py > "$STATE/logs/vllm_api.json" 2> "$STATE/logs/vllm_api.err"
    python3 -m evals check-engine-args configs/*.yaml configs/gpu/[!b]*.yaml > "$STATE/logs/check_engine_args.log" 2>&1
    echo "check-engine-args exit $?"
    python3 -m evals doctor configs/gpu/mtp_prefix.yaml > "$STATE/logs/doctor.log" 2>&1; echo "doctor exit $?"
    fi
    cat "$STATE/logs/versions.txt" "$STATE/logs/nvidia-smi.csv"
    ;;
  ab)
    for config in "$@"; do
      name=$(basename "$config" .yaml)
      t0=$(date +%s)
      timeout 560 python3 -m evals ab "$config" --reports "$STATE/reports" --store "$STATE/store" \
        > "$STATE/logs/ab-$name.log" 2>&1
      code=$?
      echo "ab $name exit $code in $(( $(date +%s) - t0 )) s: $(grep -m1 '^VERDICT' "$STATE/logs/ab-$name.log")"
      grep -E "model ready|arms finished|reusing|warning|Error|error" "$STATE/logs/ab-$name.log" | head -8
    done
    ;;
  canary)
    name=$(basename "$1" .yaml)
    t0=$(date +%s)
    timeout 570 python3 -m evals canary "$1" --reports "$STATE/reports" --store "$STATE/store" \
      > "$STATE/logs/canary-$name.log" 2>&1
    echo "canary $name exit $? in $(( $(date +%s) - t0 )) s"
    grep -E "^CANARY|canary|fired" "$STATE/logs/canary-$name.log" | tail -12
    ;;
  overhead)
    name=$(basename "$1" .yaml)
    timeout 560 python3 benchmarks/bench_overhead.py "$1" --limit "${2:-1200}" \
      > "$STATE/logs/overhead-$name.log" 2>&1
    echo "overhead $name exit $?"; cat "$STATE/logs/overhead-$name.log" | tail -6
    ;;
  study)
    name=$(basename "$1" .yaml)
    limit=()
    if [ -n "${2:-}" ]; then
      # beside the config: its relative model path resolves against the file that sets it
      limit_config="$(dirname "$1")/.$name-limit$2.yaml"
      printf 'extends: %s\nlimit: %s\n' "$(basename "$1")" "$2" > "$limit_config"
      set -- "$limit_config"
    fi
    for how in "1" "2 --arms-per-gpu 2"; do
      tag=parallel-${how// /_}; tag=${tag//--/}
      t0=$(date +%s)
      # shellcheck disable=SC2086
      timeout 280 python3 -m evals ab "$1" --fresh --parallel $how \
        --reports "$STATE/reports-$tag" --store "$STATE/store-$tag" > "$STATE/logs/study-$name-$tag.log" 2>&1
      echo "study $name $tag exit $? in $(( $(date +%s) - t0 )) s"
      grep -E "^VERDICT|arms at once|arms finished|model ready" "$STATE/logs/study-$name-$tag.log" | head -12
    done
    ;;
  shift)
    # bash run.sh shift LIMIT CONFIG[:SEED] ...: each config (with its seed) at LIMIT items a
    # task, with `logprobs: 5` and `noise_floor: true` added, its own run store (no arm reused
    # across runs: each A/A's replicates are fresh), then each task's shift test (mean KL
    # excess, its interval, delta, Holm p)
    limit=$1; shift
    for spec in "$@"; do
      config=${spec%%:*}; seed=${spec#"$config"}; seed=${seed#:}
      name=$(basename "$config" .yaml)${seed:+-s$seed}
      derived="$(dirname "$config")/.$name-l$limit.yaml"
      printf 'extends: %s\nlimit: %s\nlogprobs: 5\nnoise_floor: true\n' "$(basename "$config")" "$limit" > "$derived"
      [ -n "$seed" ] && printf 'seed: %s\nname: gpu-%s\n' "$seed" "$name" >> "$derived"
      t0=$(date +%s)
      timeout "$STEP_TIMEOUT" python3 -m evals ab "$derived" --reports "$STATE/reports" \
        --store "$STATE/store-$name" > "$STATE/logs/shift-$name.log" 2>&1
      echo "shift $name exit $? in $(( $(date +%s) - t0 )) s: $(grep -m1 '^VERDICT' "$STATE/logs/shift-$name.log")"
      run_dir=$(grep -m1 -oE 'report: .*/report.html' "$STATE/logs/shift-$name.log" | sed 's|report: ||; s|/report.html||')
      [ -n "$run_dir" ] && python3 benchmarks/gpu_h200/shift_lines.py "$run_dir" | tee -a "$STATE/logs/shift-lines.log"
    done
    ;;
  hybrid-train)
    t0=$(date +%s)
    timeout 500 python3 scripts/build_hybrid.py --device cuda --time-budget "${1:-300}" \
      > "$STATE/logs/build_hybrid.log" 2>&1
    echo "build_hybrid exit $? in $(( $(date +%s) - t0 )) s"
    grep -v "falling back" "$STATE/logs/build_hybrid.log" | tail -5
    rm -rf "$STATE/tiny-hybrid" && cp -r models/tiny-hybrid "$STATE/tiny-hybrid"
    tar czf "${OUT:-/tmp/out}/tiny-hybrid.tgz" -C "$STATE" tiny-hybrid
    ;;
  hybrid-study)
    # the model trained by hybrid-train on this machine replaces the working tree's copy
    [ -d "$STATE/tiny-hybrid" ] && rm -rf models/tiny-hybrid && cp -r "$STATE/tiny-hybrid" models/tiny-hybrid
    name=$(basename "$1" .yaml)
    t0=$(date +%s)
    timeout "$STEP_TIMEOUT" python3 -m evals ab "$1" --parallel 2 --arms-per-gpu 2 \
      --reports "$STATE/reports-hybrid" --store "$STATE/store-hybrid" >> "$STATE/logs/study-$name.log" 2>&1
    echo "study $name exit $? in $(( $(date +%s) - t0 )) s"
    grep -E "^VERDICT|arms at once|arms finished|model ready|reusing" "$STATE/logs/study-$name.log" | tail -14
    rm -f "$STATE/logs/hybrid-key-lines.log"
    find "$STATE/reports-hybrid" -name worker.log | sort | while read -r log; do
      echo "== $log" >> "$STATE/logs/hybrid-key-lines.log"
      grep -aE "Mamba cache mode|block size|Asynchronous scheduling|prefix cache hit rate|Prefix cache hit|acceptance|Accepted|gdn|GDN|speculative" "$log" \
        | head -30 >> "$STATE/logs/hybrid-key-lines.log"
    done
    ;;
esac
# what came back: summaries, canary records, reports, worker logs' key lines, the logs
cd "$STATE" && tar czf "${OUT:-/tmp/out}/$step.tgz" --exclude='*/lm_eval/*' --exclude='store/*' \
  --exclude='*.safetensors' logs reports reports-* 2>/dev/null
echo "step $step took $(( $(date +%s) - started )) s"
