set -u
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
mkdir -p /tmp/d $OUT
printf 'extends: aa_shift.yaml\nname: gpu-aa-diag\nlimit: 200\n' > configs/gpu/.aa-diag.yaml
python3 -m evals ab configs/gpu/.aa-diag.yaml --reports /tmp/d/r --store /tmp/d/s > /tmp/d/log 2>&1 &
pid=$!
for i in $(seq 1 60); do sleep 5; if ! kill -0 $pid 2>/dev/null; then break; fi; if grep -q "model ready" /tmp/d/log; then echo "model ready seen at $((i*5)) s"; fi; done
kill -0 $pid 2>/dev/null && { echo "still running at 300 s: SIGABRT to the workers"; pkill -ABRT -f evals.runner.worker; sleep 8; }
tail -30 /tmp/d/log
for f in /tmp/d/r/*/arms/*/worker.log; do echo "== $f"; grep -v "Capturing" "$f" | tail -60; done
tar czf $OUT/diag.tgz /tmp/d/log /tmp/d/r 2>/dev/null
