#!/usr/bin/env bash
# On the GPU machine, from the repository root, one `run` call each (pack.sh made the parts):
#   bash benchmarks/cpu_amx/step.sh part NN             # keep part NN in /tmp/amx
#   bash benchmarks/cpu_amx/step.sh install NN          # the last part; then the Python and a venv
#   bash benchmarks/cpu_amx/step.sh test PYTEST_ARGS... # pytest in that venv, the GPU hidden
#     (e.g. the quick tier: test -m "not engine" -n 8 -p no:cacheprovider -q -rs, about 120 s)
# The venv holds the CI's wheels as `pip freeze` listed them here; the tests see a CPU-only
# machine (CUDA_VISIBLE_DEVICES empty, EVALS_FORCE_CPU=1), as on a CI runner. $OUT gets the
# platform, the freeze, pytest's log and the tests' artifacts.
set -uo pipefail
A=/tmp/amx; mkdir -p $A; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$A/py/lib:$A/libs
step=$1; shift
case $step in
  part)
    cp ".gpu/amx/p/part-$1" $A/ && echo "$(ls $A/part-* | wc -l) parts"
    if [ "$1" = 00 ]; then
      grep -m1 "model name" /proc/cpuinfo; grep -o "avx512f\|amx_tile" /proc/cpuinfo | sort -u | tr "\n" " "
      nproc; command -v g++; grep PRETTY /etc/os-release; ldd --version 2>&1 | sed -n 1p
    fi
    ;;
  install)
    cp ".gpu/amx/p/part-$1" $A/
    (cd $A && cat part-* | tar -xf - && tar -xJf pylibs.tar.xz && rm -f part-*)
    for lib in $A/libs/*; do  # the host's own copy where it has one
      if (/sbin/ldconfig -p 2>/dev/null || ldconfig -p) | awk '{print $1}' | grep -qx "$(basename "$lib")"; then
        rm "$lib"; else echo "bundled: $(basename "$lib")"; fi
    done
    # the dynamic linker finds the packed libpython without LD_LIBRARY_PATH: tests that start
    # Python with a bare environment (the fork server's, the engine lock's) need it (session 37)
    printf '%s\n' $A/py/lib $A/libs > /etc/ld.so.conf.d/amx-python.conf && ldconfig
    py=$(ls $A/py/bin/python3.*)
    env -i "$py" -c "pass" || echo "the packed Python does not start in a bare environment"
    $py -c "import ssl, sqlite3, ctypes, lzma, bz2, zlib, uuid, pyexpat, sys; print('python', sys.version.split()[0])"
    $py -m venv --without-pip $A/venv
    pip_wheel=$(ls $A/wheels/pip-*.whl)  # pip runs from its own wheel
    $A/venv/bin/python "$pip_wheel/pip" install -q --no-index --no-deps --no-compile $A/wheels/*.whl 2>&1 | tail -3
    $A/venv/bin/python scripts/install_vllm_alias.py
    $A/venv/bin/python -m pip list --format=freeze > "$OUT/freeze.txt"
    echo "$(wc -l < "$OUT/freeze.txt") distributions; packed at $(cat $A/commit)"
    ;;
  test)
    export PATH=$A/venv/bin:$PATH CUDA_VISIBLE_DEVICES= EVALS_FORCE_CPU=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
    python -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2
    { grep -m1 'model name' /proc/cpuinfo
      echo "flags: $(grep -o 'avx512f\|avx512_bf16\|amx_tile\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
      echo "cpus: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"  # nproc obeys both
      python -c "import sys, torch, vllm, lm_eval; print('python', sys.version.split()[0], 'torch', torch.__version__, 'vllm', vllm.__version__, 'lm_eval', lm_eval.__version__, 'cuda', torch.cuda.is_available())"
      echo "packed at $(cat $A/commit); pytest $*"; } > "$OUT/platform.txt" 2>&1
    cat "$OUT/platform.txt"
    t0=$(date +%s)
    timeout "${STEP_TIMEOUT:-560}" python -m pytest "$@" > "$OUT/pytest.log" 2>&1
    echo "pytest exit $? in $(( $(date +%s) - t0 )) s"
    grep -E "passed|failed" "$OUT/pytest.log" | tail -2
    grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
    [ -d test-artifacts ] && tar czf "$OUT/test-artifacts.tgz" test-artifacts
    ;;
esac
