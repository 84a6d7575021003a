"""The one door to the engines: only this subpackage imports lm-eval and vLLM.

`worker` runs inside the arm's own process; `launch` (imported by the CLI) starts that
process and never imports either library itself.
"""
