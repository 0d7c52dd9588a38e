"""Notebook 01: reproduce the crash on the real server and classify it."""
