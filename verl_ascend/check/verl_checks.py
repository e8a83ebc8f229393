"""verl's own validation of a composed config, run in-process without Ray.

What exists (found by feature, not version): ``verl.utils.config.validate_config(config,
use_reference_policy, use_critic)`` (0.5+; it also builds the actor config dataclass and runs its
``validate``), and the rollout config dataclass whose ``__post_init__`` checks rollout parallel sizes
and modes. ``need_reference_policy`` takes the config from 0.7 on; 0.6.x takes the worker mapping,
which main_ppo fills from the same two switches we read here.
"""

import contextlib
import inspect
import io
import os
import re
import warnings

from verl_ascend.core.findings import ERROR, finding


def uses_reference_policy(cfg) -> bool:
    try:
        from verl.trainer.ppo.utils import need_reference_policy

        if "config" in inspect.signature(need_reference_policy).parameters:
            return bool(need_reference_policy(cfg))
    except ImportError:
        pass
    return bool(cfg.algorithm.get("use_kl_in_reward", False) or cfg.actor_rollout_ref.actor.get("use_kl_loss", False))


def uses_critic(cfg) -> bool:
    try:
        from verl.trainer.ppo.utils import need_critic

        with warnings.catch_warnings():  # "Disabled critic as ..." is verl telling itself, not the user
            warnings.simplefilter("ignore")
            return bool(need_critic(cfg))
    except ImportError:
        return cfg.algorithm.adv_estimator == "gae"


def _message(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {' '.join(text.split())}"


def run_verl_validation(cfg) -> tuple:
    """Returns (list of what ran, [Finding]) — one finding per check that refused the config."""
    ran, findings = [], []
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        try:
            from verl.utils.config import validate_config
        except ImportError:
            validate_config = None
        if validate_config is not None:
            ran.append("verl.utils.config.validate_config")
            try:
                validate_config(cfg, use_reference_policy=uses_reference_policy(cfg), use_critic=uses_critic(cfg))
            except Exception as exc:
                findings.append(finding("verl", ERROR, (), f"verl's validate_config refused the config: {_message(exc)}",
                                        "change the values the message names"))
        rollout = cfg.actor_rollout_ref.rollout
        if "_target_" in rollout:
            ran.append(rollout["_target_"])
            try:
                from verl.utils.config import omega_conf_to_dataclass

                omega_conf_to_dataclass(rollout)
            except Exception as exc:
                findings.append(finding("verl", ERROR, ("actor_rollout_ref.rollout",),
                                        f"verl's rollout config refused actor_rollout_ref.rollout: {_message(exc)}",
                                        "change the rollout values the message names"))
    return ran, findings


def raises_batched_tokens() -> bool:
    """Does the installed verl's vLLM server raise max_num_batched_tokens to max_model_len itself when
    chunked prefill is off (verl 0.9.1: ``vLLMHttpServer._validate_configs``)? Read from its source:
    the module imports vllm, which a checking machine need not have."""
    from verl_ascend.core import verl_install

    root = verl_install.package_dir()
    if root is None:
        return False
    path = root / "workers" / "rollout" / "vllm_rollout" / "vllm_async_server.py"
    try:
        return bool(re.search(r"max_num_batched_tokens\s*=\s*self\.config\.max_model_len", path.read_text()))
    except OSError:
        return False


_MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "reward_model.model.path")


def remote_models(cfg, use_critic: bool) -> dict:
    """{key: path} for model paths that are not on this machine (hub ids): verl would download them."""
    out = {}
    for key in _MODEL_KEYS:
        if key.startswith("critic") and not use_critic:
            continue
        if key.startswith("reward_model") and not cfg.get("reward_model", {}).get("enable", False):
            continue
        node = cfg
        for part in key.split("."):
            node = node.get(part) if hasattr(node, "get") else None
            if node is None:
                break
        if isinstance(node, str) and node and not os.path.exists(os.path.expanduser(node)):
            out[key] = node
    return out
