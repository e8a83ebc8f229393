"""`verl-ascend logs`: verl's console step lines -> a table, throughput per card, plots.

``parse`` reads the lines (Ray prefixes and ANSI colours allowed), ``throughput`` applies seed
003's formulas, ``plot`` draws the panels (matplotlib, optional extra ``plot``), ``command`` is
the CLI.
"""
