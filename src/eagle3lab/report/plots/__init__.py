"""Figures, one module per figure family; each draws from sidecar data only."""
