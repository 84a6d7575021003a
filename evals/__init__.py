"""Paired accuracy-regression evaluation for vLLM serving optimizations.

Data flows one way: config -> arm runs -> paired samples -> analysis -> verdict -> report.
Only :mod:`evals.runner` imports lm-eval and vLLM.
"""

__version__ = "0.1.0"
