"""The installed sglang against its release: where it is, its state, backups, patching and restore.

Shared by every stage above it (notebook 01 checks the package is a release before launching, notebook 03 and
the capture check patch it, preflight and the report read its state), so it sits below all of them.
"""
