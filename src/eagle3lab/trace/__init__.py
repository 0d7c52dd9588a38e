"""Stage 2 (notebook 02): what sglang's own source says the runtime needs, and who lacks it."""
