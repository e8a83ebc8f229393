"""Give verl's default trainer (v1) the forced save before an allocation ends that its legacy trainer has.

Why: verl forces a checkpoint when the machine's time is nearly up: ``should_save_ckpt_esi``
    (``verl/utils/checkpoint/checkpoint_manager.py``) reads the expiration time from
    ``MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP`` (or SageMaker's variable) and says "save" once the time left is
    at most 60 s + the longest step so far + ``trainer.esi_redundant_time``. On verl 0.9.1 only the legacy trainer
    (``ray_trainer.RayPPOTrainer.fit``, ``trainer.use_v1=False``) asks it; the default trainer,
    ``verl/trainer/ppo/v1/trainer_base.PPOTrainer.fit``, saves only on ``save_freq`` and at the last step. So a run
    whose allocation ends (a Slurm or Volcano time limit; ``verl-ascend supervise --deadline``, which sets the
    variable) loses every step since the last ``save_freq`` save: measured by hand, 58 steps trained, nothing saved
    (docs/supervise.md).
How: wraps ``PPOTrainer.step`` (the step's rollout and updates; ``fit`` decides the save right after it returns).
    The wrapper times the steps as the legacy trainer does (from one step's start to the next: its
    ``max_steps_duration``, so nothing is forced before the run's first step has a length) and, when verl's own
    function says the expiration is near, ``save_freq > 0`` and ``fit`` will not save this step anyway, prints verl's
    line ``Force saving checkpoint: ESI instance expiration approaching.`` and calls ``_save_checkpoint`` under the
    same ``save_checkpoint`` timer. Nothing changes when no expiration variable is set.
Upstream: the legacy trainer's check (``ray_trainer.py``, ``should_save_ckpt_esi`` before its save); not yet
    in ``trainer/ppo/v1`` (verl 0.9.1).
Remove when: ``PPOTrainer.fit`` of trainer v1 calls ``should_save_ckpt_esi`` itself (detected: the patch then says
    not applicable).
"""

import inspect
import time

from verl_ascend.core.marks import method_patch
from verl_ascend.core.registry import Patch

NAME = "deadline_save"
TARGET = "verl.trainer.ppo.v1.trainer_base"
LINE = "Force saving checkpoint: ESI instance expiration approaching."
_STARTED = "_verl_ascend_step_started"
_LONGEST = "_verl_ascend_longest_step"


def _applies(module):
    trainer = getattr(module, "PPOTrainer", None)
    if trainer is None or not all(hasattr(trainer, a) for a in ("step", "fit", "_save_checkpoint")):
        return f"{TARGET} has no PPOTrainer with step, fit and _save_checkpoint"
    try:
        from verl.utils.checkpoint import checkpoint_manager
    except Exception as exc:  # noqa: BLE001 - any import failure is a reason to skip, never to break verl
        return f"verl.utils.checkpoint.checkpoint_manager does not import: {exc}"
    if not hasattr(checkpoint_manager, "should_save_ckpt_esi"):
        return "this verl has no should_save_ckpt_esi"
    try:
        fit_source = inspect.getsource(trainer.fit)
    except (OSError, TypeError):
        fit_source = ""
    if "should_save_ckpt_esi" in fit_source:
        return "trainer v1's fit asks should_save_ckpt_esi itself"
    return None


def will_save(trainer_config, step: int, total: int) -> bool:
    """Whether ``fit`` saves this step anyway (``save_freq`` or the last step), as ``PPOTrainer.fit`` decides."""
    freq = trainer_config.get("save_freq", -1) or -1
    return freq > 0 and (step >= total or step % freq == 0)


def force_save(trainer_config, step: int, total: int, longest: float, near) -> bool:
    """Whether to force a save after this step: ``near(longest, redundant_time)`` is verl's own expiration check."""
    if (trainer_config.get("save_freq", -1) or -1) <= 0 or will_save(trainer_config, step, total):
        return False
    return bool(near(max_steps_duration=longest, redundant_time=trainer_config.get("esi_redundant_time", 0) or 0))


def _wrap_step(original):
    def step(self, metrics, timing_raw):
        now = time.monotonic()
        started = getattr(self, _STARTED, None)
        if started is not None:  # the previous step's length, from its start to this one's, as verl times a step
            setattr(self, _LONGEST, max(getattr(self, _LONGEST, 0.0), now - started))
        setattr(self, _STARTED, now)
        batch = original(self, metrics, timing_raw)
        from verl.utils.checkpoint.checkpoint_manager import should_save_ckpt_esi
        from verl.utils.debug import marked_timer

        config = self.config.trainer
        if force_save(config, self.global_steps, self.total_training_steps, getattr(self, _LONGEST, 0.0),
                      should_save_ckpt_esi):
            print(LINE, flush=True)
            with marked_timer("save_checkpoint", timing_raw, color="green"):
                self._save_checkpoint()
        return batch

    return step


_apply, _revert = method_patch(NAME, TARGET, "PPOTrainer", "step", _wrap_step,
                               "trainer v1's PPOTrainer.step forces a save when verl's ESI check says the allocation is ending")


PATCH = Patch(name=NAME, targets=(TARGET,), applies=_applies, apply=_apply, doc=__doc__, revert=_revert)
