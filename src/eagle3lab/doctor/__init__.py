"""``python -m eagle3lab doctor``: why does EAGLE-3 give no speedup on *my* sglang deployment?

Reads what a user has (launch command, server log, bench_serving output, configs), builds the rules engine's
``Evidence`` and prints one finding per cause tag. The rules are the ones notebook 03 applies to the project's
own run (``bench.diagnostics``)."""

from eagle3lab.doctor.run import add_arguments, doctor, format_table, run  # noqa: F401
