"""Decide: the statistical gate, then the gate list (speed, exercise, drift chart)."""
