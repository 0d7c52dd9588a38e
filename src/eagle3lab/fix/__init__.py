"""Stage 3a (notebook 03): patch the installed sglang, relaunch, check hidden-state capture."""
