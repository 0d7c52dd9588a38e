"""Stage 4: the cost model, diagnostics, figures and REPORT.md, drawn from the sidecars."""
