"""Notebook 03's benchmark and `eagle3lab bench`: load generator, sweep, metrics and cross-checks against real servers."""
