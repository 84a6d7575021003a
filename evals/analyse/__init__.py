"""Analyse: per task, the paired tests, intervals and MDE (with evals.stats), early-stop
looks, speed, cache stress and exercise evidence."""
