"""``rehearse --lr``: the actor's learning rate of a rehearsal (#47: a changed rate must move KL / grad_norm).

The rehearsal forces its own rate (``REHEARSAL_LR``); ``--lr`` replaces it, and the recipe's rate and an ``--override``
of it are replaced either way (the plan lists them). The default plan is unchanged.
"""

import argparse

import pytest

from verl_ascend.commands import rehearse as command
from verl_ascend.rehearse.plan import overrides as plan

pytestmark = pytest.mark.verl_agnostic  # the plan and the parser decide this from strings alone

RECIPE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.optim.lr=1e-6"]


def _plan(**kw):
    return plan.build("ppo_trainer", RECIPE, model_dir="/m", train_file="/t.parquet", val_file="/v.parquet", nproc=2,
                      steps=1, prompt_length=32, response_length=16, ckpt_dir="/c", ray_tmp="/r", n_resp=2, batch=4, **kw)


def _lrs(made):
    return [item for item in made.overrides if plan.split(item)[1] == "actor_rollout_ref.actor.optim.lr"]


def test_the_default_rate_is_the_rehearsals_and_the_recipes_is_listed_as_replaced():
    made = _plan()
    assert _lrs(made) == [f"actor_rollout_ref.actor.optim.lr={plan.REHEARSAL_LR}"]
    assert any("learning rate -> the rehearsal's" in c and "1e-6" in c for c in made.changes), made.changes
    assert any(c.startswith(f"learning rate -> {plan.REHEARSAL_LR}: a tiny random model") for c in made.changes)


def test_lr_replaces_the_rehearsals_rate_and_says_so():
    made = _plan(lr="1e-2")
    assert _lrs(made) == ["actor_rollout_ref.actor.optim.lr=1e-2"]  # one value: Hydra's last-wins has nothing to pick
    assert any(c.startswith("learning rate -> 1e-2 (--lr") for c in made.changes), made.changes


def _parse(argv):
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    return parser.parse_args(["rehearse", "r.sh", *argv])


def test_the_cli_takes_a_positive_rate_as_written_and_refuses_others(capsys):
    assert _parse([]).lr is None and _parse(["--lr", "1e-4"]).lr == "1e-4"
    for bad in ("0", "-1e-3", "fast", "inf", "nan"):
        with pytest.raises(SystemExit) as stop:
            _parse([f"--lr={bad}"])
        assert stop.value.code == 2 and "is not a positive learning rate" in capsys.readouterr().err
