"""`verl-ascend supervise -- COMMAND...`: keep a long verl run going, and say what each failure cost.

The detectors and the decisions are pure functions of a recorded snapshot (the rule of nvidia-resiliency-ext's
out-of-job watcher, nvrx-watch: "pure functions of (Snapshot, Config)"), so each one is a unit test on a
timeline; the loop around them is glue.

- ``timeline``: one attempt as recorded: console lines with their arrival times, CPU-time samples of the run's
  processes, checkpoint-folder sizes, the exit; verl's step lines read from it with ``logs``' parser.
- ``detect``: crash lines while the command lives, a hang inside a step (budgets learned from the run's own
  phase timings, confirmed by nothing moving), an exit 0 that did not finish, training-health flags.
- ``decide``: the decision table: failure family -> retry class -> retry / stop, the crash-loop rule, the
  retry budget with back-off, the exit codes.
- ``evidence``: what is saved before anything is ended: the stacks (py-spy), process states, log tails.
- ``report``: the attempts and the totals (time lost, goodput), ``report.json`` in the run folder, read back
  by ``--status`` and by a supervisor restarted on the same folder.
- ``launch``: what the command is (a main_ppo line or a recipe script), its trainer settings, the
  overrides a relaunch adds (resume, the deadline's save).
- ``attempt``: an attempt's processes: one this supervisor started, or one a supervisor before it left running
  (unbound: it outlives its supervisor; its exit code written by a wrapper into the attempt's folder).
- ``relaunch``: before a relaunch: the attempt ended on every ``--nodes`` node by its mark, the nodes back, the
  checkpoint synced and checked on each, the newest step whole on every node (or a stop naming the file).
- ``run``: the loop.
"""
