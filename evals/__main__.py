import sys

from evals.cli import main

if __name__ == "__main__":  # vLLM spawns processes: keep the entry point guarded
    sys.exit(main())
