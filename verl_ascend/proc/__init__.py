"""The processes of one run, handled for the tools that start runs: ``rehearse`` and ``supervise``.

A run here is one command (main_ppo, a launch script, the rehearsal's Ray cluster) and every process it
starts, Ray's renamed daemons and actors included. This layer knows nothing of verl or of recipes; it
answers these, each in one module:

- :mod:`.marks` — which processes are the run's: each carries ``VAR=<run>`` in its environment, which
  Ray's workers and daemons inherit and keep wherever they go (another session, another name);
- :mod:`.namespace` — a PID namespace for the run where the host allows one (util-linux ``unshare``): the
  kernel then ends every process of the run with its first one;
- :mod:`.guard` — what ends the run when its owner ends: stop signals turned into an exception, the
  parent-death signal, a guard process that ends the marked processes when the owner is SIGKILLed;
- :mod:`.launch` — start a command so marked (in its namespace, guarded), end exactly its processes, and
  look afterwards at what is left (a claim "nothing left running" is made only from that look);
- :mod:`.follow` — read a log file as it grows (the run's console, Ray's session logs);
- :mod:`.info` — what a process is (``/proc/PID/stat``: name, state, CPU, start time) and what can read its
  Python stacks (py-spy, ``kernel.yama.ptrace_scope``): one reader for supervise's evidence, doctor, the marks.
"""
