"""`verl-ascend logs`: verl's console step lines -> a table, throughput per card, plots.

``parse`` reads the lines (Ray prefixes and ANSI colours allowed), ``throughput`` applies the
formulas of docs/field-reports.md#235b-throughput-formulas, ``plot`` draws the panels (matplotlib, optional extra ``plot``), ``report`` is one
run of the command (its CLI: ``verl_ascend.commands.logs``).
"""
