"""Stage 0, shared by every notebook: profiles, model resolution, the server process, the CPU harness."""
