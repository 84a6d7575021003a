"""Preflight: what is checked before an arm's engine runs an item - the model doctor, task
names, fault support, whether the arms differ, and the config audit."""
