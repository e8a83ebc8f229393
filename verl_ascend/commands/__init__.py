"""One module per ``verl-ascend`` subcommand, named after it: argument parsing, then a call into the
feature package that does the work. The top layer: nothing below imports from here."""
