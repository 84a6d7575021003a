"""Run Python as on an AVX2-only x86-64 CPU (an AMD EPYC Rome/Milan), on a machine that has
AVX-512: put this folder first on PYTHONPATH (benchmarks/bench_avx2_suite.py does).

What an AVX2-only machine changes for this suite, and how each is reproduced here:
- vLLM's CPU platform loads its AVX2 kernel build (`vllm._C_AVX2`: no `cpu_gemm_wna16`,
  no shared-memory all-reduce) and refuses the FP8 KV cache: both decided by
  `torch.cpu._is_avx512_supported()` / `_is_avx512_bf16_supported()` /
  `_is_amx_tile_supported()`, patched here to answer False once torch.cpu is imported;
- torch's own kernels dispatch to their AVX2 variants: ATEN_CPU_CAPABILITY=avx2;
- oneDNN (torch's matmuls, vLLM's W8A8) stays on AVX2: ONEDNN_MAX_CPU_ISA=AVX2;
- the suite's platform probe reads a recorded AVX2 EPYC's /proc/cpuinfo (EVALS_CPUINFO).

The clock speed, cache sizes and memory of a real AVX2 machine are not reproduced: this
shows what the AVX2 code paths cost, on this machine's cores.
"""

import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
os.environ.setdefault("EVALS_CPUINFO", str(_HERE.parents[1] / "tests" / "fixtures" / "cpuinfo"
                                         / "epyc_zen2_avx2.txt"))
_NOT_HERE = ("_is_avx512_supported", "_is_avx512_bf16_supported", "_is_avx512_vnni_supported",
             "_is_vnni_supported", "_is_amx_tile_supported", "_is_amx_fp16_supported")


def _no(*_args, **_kwargs) -> bool:
    return False


def _patch(module) -> None:
    for name in _NOT_HERE:
        if hasattr(module, name):
            setattr(module, name, _no)


class _PatchTorchCpu(importlib.abc.MetaPathFinder):
    """Patches torch.cpu (and torch._C._cpu) right after torch.cpu is imported."""

    def find_spec(self, name, path, target=None):
        if name != "torch.cpu":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _patch(module)
            _patch(sys.modules["torch"]._C._cpu)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchTorchCpu())
