"""``verl-ascend check RECIPE.sh``: preflight a verl launch script on any machine, before the cluster.

Pipeline (one module each): ``extract`` runs the script under bash with ``python``/``ray`` replaced by
recorders and returns the trainer's argv; ``compose`` builds the full config from the installed
verl's Hydra configs; ``verl_checks`` runs verl's own validation; ``model_facts``, ``rules`` and
``hbm`` apply the Ascend A2 preflight rules; ``render`` prints text or JSON. ``run_check`` ties them.
"""


from .report import run_check  # noqa: F401
