"""The pipelines: each command a short sequence of stage calls (docs/architecture.md, "How the
code is laid out"): plan -> preflight -> run -> pair -> analyse -> decide -> record -> report.

- `ab`: both arms of a config run (or are reused from the run store) and are compared.
- `drift`: a deployment's arm runs again and is compared with its pinned golden run.
- `compare`: two existing lm-eval `--log_samples` directories; no run stage.
- `study`: N arms, each compared with the baseline, one Holm family over them all.
- `canary`: the `ab` run again with each fault injected into the candidate.

`ab` and `study` share their run sequence (`preflight_and_run`); every comparison ends in
`finish` (pair, analyse, decide, record, report).
"""
