"""Stage 3b (notebook 03): load generator, sweep, metrics and cross-checks against real servers."""
