"""The decode cost model (moving here from ``report.costmodel``; new modules start here)."""
