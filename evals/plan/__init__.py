"""Plan: a config file becomes a validated config, the arms' specs, sample sizes and the
seeded item schedule."""
