"""REPORT.md, its appendices and figures, drawn from the sidecars and the cost model's evidence."""
