"""Pair: lm-eval `--log_samples` files become validated per-item samples, then paired items
on the accuracy scale."""
