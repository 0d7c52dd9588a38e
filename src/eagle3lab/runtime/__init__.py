"""Shared by every notebook: profiles, model resolution, the server process, the CPU harness."""
