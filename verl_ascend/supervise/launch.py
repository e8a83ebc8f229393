"""What the supervised command is, the trainer settings it runs with, and what a relaunch adds to it.

The command is a verl trainer line (``python -m verl.trainer.main_ppo k=v ...``) or a launch script
(``bash recipe.sh``). Both are read the way ``check`` reads a recipe (``recipe.extract`` in its sandbox, then
``recipe.compose`` with the installed verl's configs): ``trainer.save_freq`` (a run that never saves cannot be
resumed), ``trainer.total_training_steps`` (when set; else verl's ``Total training steps: N`` line says it),
``trainer.default_local_dir`` (the checkpoint folder), ``trainer.nnodes``.

A relaunch appends Hydra overrides to the command: ``trainer.resume_mode=auto`` (verl then loads the step
``latest_checkpointed_iteration.txt`` names), and for ``--deadline`` the ESI keys (:func:`deadline_overrides`).
A trainer line takes them directly; a script takes them as arguments, which reach verl when its trainer line
ends with ``"$@"`` (verl's example scripts do) — the relaunch then checks the new log says "Resuming from".
"""

import os
import re
import shlex
import tempfile

from verl_ascend.core import findings as F

TRAINERS = ("main_ppo", "main_dapo", "main_grpo")
TOTAL_STEPS = re.compile(r"Total training steps: (\d+)")
# verl 0.9.1 reads the expiration from these (verl/utils/checkpoint/checkpoint_manager.py, should_save_ckpt_esi:
# MLP_... first, as epoch seconds) and assumes a 60 s save; it forces a save when the time left is below
# 60 + the longest step so far + trainer.esi_redundant_time, and only when trainer.save_freq > 0
EXPIRATION_VAR = "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"
VERL_SAVE_GUESS = 60.0


class BadCommand(F.BadInput):
    """The supervised command cannot be supervised as given."""


def deadline_of(text: str) -> float:
    """``--deadline``: epoch seconds, or an ISO time (local unless it names its zone)."""
    import datetime

    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise BadCommand(f"--deadline {text}: neither epoch seconds nor an ISO time; write e.g. 2026-12-24T18:00") \
            from None


def is_trainer_line(argv) -> bool:
    """``python -m verl.trainer.main_ppo ...`` (or a trainer's .py file) rather than a script or something else."""
    for i, token in enumerate(argv):
        module = argv[i + 1] if token == "-m" and i + 1 < len(argv) else token if token.endswith(".py") else ""
        if any(m in module for m in TRAINERS):
            return True
    return False


def script_of(argv):
    """The launch script a command runs (``bash x.sh``, ``./x.sh``), else None."""
    if argv and argv[0].endswith(".sh"):
        return argv[0]
    if len(argv) > 1 and os.path.basename(argv[0]) in ("bash", "sh") and argv[1].endswith(".sh"):
        return argv[1]
    return None


def facts(argv, env: dict, cwd: str) -> dict:
    """The trainer settings of the command; ``{"read": why not}`` when it is not a verl command or cannot be read."""
    script = script_of(argv)
    if script is None and not is_trainer_line(argv):
        return {"read": "not a verl trainer command: no settings read"}
    import importlib.util

    if importlib.util.find_spec("verl") is None:
        return {"read": "verl is not installed here: the trainer settings were not read"}
    from verl_ascend.recipe import compose, extract, sandbox
    from verl_ascend.recipe.layout import get

    with tempfile.TemporaryDirectory(prefix="va-supervise-") as tmp:
        if script is None:  # a trainer line: read as a one-line script, the same way
            script = os.path.join(tmp, "command.sh")
            with open(script, "w") as fh:
                fh.write("#!/usr/bin/env bash\n" + shlex.join(argv) + "\n")
        else:
            script = os.path.join(cwd, script)
        try:
            got = extract.extract(script, env_overrides=env, cwd=cwd)
        except sandbox.Unavailable as exc:
            return {"read": f"not read: {exc}"}
    if got.launch is None:
        return {"read": "not read: " + ("; ".join(f.message for f in got.findings) or "no trainer call found")}
    composed = compose.compose_launch(got.launch)
    if composed.config is None:
        return {"read": "not read: " + "; ".join(f.message for f in composed.findings)}
    cfg = composed.config
    local = get(cfg, "trainer.default_local_dir")
    if local and not os.path.isabs(str(local)):
        local = os.path.join(got.launch.cwd, str(local))
    return {"read": "composed", "save_freq": get(cfg, "trainer.save_freq"),
            "total_training_steps": get(cfg, "trainer.total_training_steps"),
            "default_local_dir": local, "nnodes": get(cfg, "trainer.nnodes"),
            "resume_mode": get(cfg, "trainer.resume_mode")}


def check(argv, settings: dict) -> None:
    """Refuse what cannot be supervised: no command; a trainer that never saves (nothing to resume from)."""
    if not argv:
        raise BadCommand("no command given: write it after --, e.g. verl-ascend supervise -- bash recipe.sh")
    freq = settings.get("save_freq")
    if freq is not None and int(freq) <= 0:
        raise BadCommand(f"trainer.save_freq={freq}: the run never saves, so a restart would train from step 1 again; "
                         "set trainer.save_freq to a positive number of steps (e.g. trainer.save_freq=10)")


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def with_overrides(argv, overrides) -> list:
    """``argv`` with ``overrides`` appended; an earlier override of the same key is dropped (the last one counts in
    Hydra anyway; dropping it keeps the command readable)."""
    keys = {_key(o) for o in overrides}
    kept = [a for a in argv if not ("=" in a and not a.startswith("-") and _key(a) in keys)]
    return kept + list(overrides)


def resume_overrides() -> list:
    return ["trainer.resume_mode=auto"]


def deadline_overrides(deadline: float, save_s: float = None) -> tuple:
    """(env, overrides) that make verl force a save before ``deadline`` (epoch s): the expiration variable for the
    driver, and ``trainer.esi_redundant_time`` carrying what the save takes beyond verl's 60 s guess plus a
    minute's margin. The variable is also set in Ray's runtime env, which a cluster's workers get: verl reads it
    in the TaskRunner actor."""
    extra = max(0.0, (save_s or VERL_SAVE_GUESS) - VERL_SAVE_GUESS) + 60.0
    value = str(int(deadline))
    return ({EXPIRATION_VAR: value},
            [f"trainer.esi_redundant_time={int(extra)}",
             f"++ray_kwargs.ray_init.runtime_env.env_vars.{EXPIRATION_VAR}='{value}'"])
