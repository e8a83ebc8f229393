"""Forward the driver's ``VERL_ASCEND*`` settings to every Ray worker of the job.

Why: Ray workers on other nodes inherit the environment of the ``ray start`` process on that node,
    not the driver's. A switch such as ``VERL_ASCEND_ROLLOUT_ORDER=interleaved`` set in the
    launch script would reach the driver only, and the workers would disagree with it.
How: wraps ``ray.init`` so the job's ``runtime_env.env_vars`` carries every ``VERL_ASCEND*``
    variable of the driver. Values the caller put in ``runtime_env`` win. This covers verl's
    main_ppo (``get_ppo_ray_runtime_env`` merged with ``ray_kwargs``) and DAPO's own ``ray.init``.
Upstream: none needed; this is how a plugin's settings travel.
Remove when: never; it is the plugin's own plumbing.
"""

import os
import sys

from verl_ascend.core.marks import unwrap, wrap
from verl_ascend.core.registry import Patch

NAME = "ray_runtime_env"
PREFIX = "VERL_ASCEND"


def forwarded(environ=os.environ) -> dict:
    return {k: v for k, v in environ.items() if k == PREFIX or k.startswith(PREFIX + "_")}


def merge_runtime_env(runtime_env, env: dict) -> dict:
    merged = dict(runtime_env or {})
    env_vars = dict(merged.get("env_vars") or {})
    for key, value in env.items():
        env_vars.setdefault(key, value)
    merged["env_vars"] = env_vars
    return merged


def _wrap_init(original):
    def init(*args, **kwargs):
        env = forwarded()
        if env:
            kwargs["runtime_env"] = merge_runtime_env(kwargs.get("runtime_env"), env)
        return original(*args, **kwargs)

    return init


def _applies(module):
    return None if callable(getattr(module, "init", None)) else "ray has no init()"


def _apply(module):
    wrap(module, "init", NAME, _wrap_init)
    return "ray.init forwards VERL_ASCEND* to runtime_env.env_vars"


def _revert() -> None:
    ray = sys.modules.get("ray")
    if ray is not None:
        unwrap(ray, "init", NAME)


PATCH = Patch(name=NAME, targets=("ray",), applies=_applies, apply=_apply, doc=__doc__, revert=_revert)
