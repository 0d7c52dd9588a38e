"""Notebook glue: each notebook's steps as functions returning plain data, parameters, display helpers.

The top of the stage order: a notebook composes the stages below it (runtime, trace, fix, bench, cost model,
report figures), so its glue may import any of them and none of them imports it.
"""
