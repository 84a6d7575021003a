"""The pipelines: each command a short sequence of stage calls (docs/architecture.md, "How the
code is laid out"): plan -> preflight -> run -> pair -> analyse -> decide -> record -> report.

- `ab`: both arms of a config run (or are reused from the run store) and are compared.
- `drift`: a deployment's arm runs again and is compared with its pinned golden run.
- `compare`: two existing lm-eval `--log_samples` directories; no run stage.
- `study`: N arms, each compared with the baseline, one Holm family over them all.
- `canary`: the `ab` run again with each fault injected into the candidate.

`ab` makes a frozen plan (evals.plan.run_plan.RunPlan) and hands it, not the config, to
preflight, the run and finish. `ab` and `study` share their run step (`run`: store reuse,
the audit beside the first engine start, a `RunResult` of manifests with effective configs
and the audit's outcome); every comparison ends in `finish` (pair, analyse, decide,
record, report).
"""
