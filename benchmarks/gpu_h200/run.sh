#!/usr/bin/env bash
# The GPU machine's steps (the `device` tool's H200, README "Measured on one H200"), run
# from the repository root there, each step one `run` call:
#   bash benchmarks/gpu_h200/run.sh install            # after the wheel parts are in /tmp/g
#   bash benchmarks/gpu_h200/run.sh ab CONFIG [CONFIG ...]
#   bash benchmarks/gpu_h200/run.sh canary CONFIG
# State (reports, the run store, logs) stays in /tmp/evals-gpu while the machine is warm;
# every step packs what it made into $OUT/<step>.tgz and prints the verdict lines.
set -uo pipefail
STATE=/tmp/evals-gpu
mkdir -p "$STATE/logs" "${OUT:-/tmp/out}"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
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
    python3 scripts/record_vllm_api.py > "$STATE/logs/vllm_api.json" 2> "$STATE/logs/vllm_api.err"
    python3 -m evals check-engine-args configs/*.yaml configs/gpu/[!b]*.yaml > "$STATE/logs/check_engine_args.log" 2>&1
    echo "check-engine-args exit $?"
    python3 -m evals doctor configs/gpu/mtp_prefix.yaml > "$STATE/logs/doctor.log" 2>&1; echo "doctor exit $?"
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
esac
# what came back: summaries, canary records, reports, worker logs' key lines, the logs
cd "$STATE" && tar czf "${OUT:-/tmp/out}/$step.tgz" --exclude='*/lm_eval/*' --exclude='store/*' \
  --exclude='*.safetensors' logs reports 2>/dev/null
echo "step $step took $(( $(date +%s) - started )) s"
