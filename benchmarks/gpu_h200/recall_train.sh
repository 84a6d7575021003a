#!/usr/bin/env bash
# Issue 54 on the GPU machine: trains the recalling hybrid (scripts/build_recall_hybrid.py)
# as a few seeded variants at once on the one GPU (each a tiny model that leaves the GPU
# mostly idle), then keeps the one with the best greedy recall on the shipped recall tasks
# as models/tiny-hybrid-recall (MODEL= to change it). Every variant's log and training.json
# stay under $STATE/train/.
#   bash benchmarks/gpu_h200/recall_train.sh [SECONDS] [VARIANT ...]   # VARIANT: LR:SEED
# Default: 380 seconds of training each, variants 3e-3:7 1e-3:7 2e-3:11 (about 470 s in
# all: the data, the training and the recall measurement fit one 600-second device call).
set -u
STATE="${STATE:-/tmp/recall-state}"
MODEL="${MODEL:-$(pwd)/models/tiny-hybrid-recall}"
seconds="${1:-380}"; shift || true
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(3e-3:7 1e-3:7 2e-3:11)
mkdir -p "$STATE/train"
for v in "${variants[@]}"; do
  lr="${v%%:*}" seed="${v##*:}"
  out="$STATE/train/lr$lr-seed$seed"
  python scripts/build_recall_hybrid.py --device cuda --batch-size 128 --lr "$lr" \
    --seed "$seed" --steps 4000 --time-budget "$seconds" --out "$out" > "$out.log" 2>&1 &
done
wait
python - "$STATE/train" "$MODEL" <<'PY'
import json, shutil, sys
from pathlib import Path

runs, best = Path(sys.argv[1]), None
for record in sorted(runs.glob("*/training.json")):
    recall = json.loads(record.read_text())["recall"]
    score = sum(row["whole"] for row in recall.values()) / len(recall)
    print(f"{record.parent.name}: mean greedy recall {score:.3f}")
    if best is None or score > best[0]:
        best = (score, record.parent)
if best is None:
    sys.exit("no variant finished: see the logs under " + str(runs))
shutil.copytree(best[1], sys.argv[2], dirs_exist_ok=True)
print(f"kept {best[1].name} as {sys.argv[2]}")
PY
