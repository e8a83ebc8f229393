"""Compose the full trainer config the way ``python -m <entry>`` would, with Hydra's compose API.

PPO/GRPO: the installed verl's ``trainer/config`` (``ppo_megatron_trainer`` / ``ppo_trainer``).
DAPO: DAPO's own config from a verl source tree (``recipe/dapo/config``, verl <= 0.7.0) or a
verl-recipe checkout (``dapo/config``) when one is given or the script ``cd``s into one; otherwise
the PPO config plus DAPO's keys, in the layout that matches the installed verl. The report says
which. Hydra errors (an unknown key without ``+``, a bad value) come back as findings.
"""

import dataclasses
import tempfile
from pathlib import Path

from omegaconf import OmegaConf

from verl_ascend.core import verl_install
from verl_ascend.core.findings import ERROR, INFO, Finding, finding

# DAPO's additions to the PPO config. The reward part moved when recipes left verl (0.7.1):
# in-repo recipe/dapo used reward_model.*, verl-recipe uses reward.reward_manager / reward_kwargs.
_DAPO_COMMON = {
    "data": {"gen_batch_size": "${data.train_batch_size}"},
    "algorithm": {"filter_groups": {"_target_": "verl.trainer.config.FilterGroupsConfig", "enable": False,
                                    "metric": None, "max_num_gen_batches": 0}},
    "trainer": {"project_name": "verl-dapo"},
}
_DAPO_REWARD = {
    "reward_model": {"reward_model": {"reward_manager": "dapo",
                                      "overlong_buffer": {"enable": False, "len": 0, "penalty_factor": 0.0,
                                                          "log": False}}},
    "reward": {"reward": {"reward_manager": {"name": "dapo"},
                          "reward_kwargs": {"overlong_buffer_cfg": {"enable": False, "len": 0,
                                                                    "penalty_factor": 0.0, "log": False},
                                            "max_resp_len": None}}},
}


# Keys that recipes written for other verl versions pass: the generic "+key" advice would be wrong.
# What the installed verl has is read from it; only the advice is kept here.
_REMOVED = {
    "grad_offload": "remove the override: the installed verl {version} has no megatron.grad_offload (the recipe "
                    "was written for a verl that had it); keep megatron.param_offload / optimizer_offload",
}


def _group_options(text: str):
    """("data", "no_such", ["legacy_data"]) from Hydra's missing-group-option message, else None."""
    import re

    missing = re.search(r"Could not find '([^']+)/([^'/]+)'", text)
    listed = re.search(r"Available options in '([^']+)':\n((?:\t[^\n]*\n?)*)", text)
    if not missing or not listed:
        return None
    options = [line.strip() for line in listed.group(2).splitlines() if line.strip()]
    return missing.group(1), missing.group(2), options


@dataclasses.dataclass
class Composed:
    config: object  # DictConfig, or None when composition failed
    source: str     # which config files were composed
    findings: list


def verl_config_dir() -> Path:
    root = verl_install.package_dir()
    if root is None:
        raise RuntimeError("verl is not installed in this Python environment: install verl to check recipes")
    return root / "trainer" / "config"


def dapo_layout(verl_cfg_dir: Path) -> str:
    """'reward' when the installed verl has the reward.reward_manager section (verl-recipe era), else
    'reward_model' (the in-repo recipe/dapo of verl <= 0.7.0)."""
    return "reward" if (verl_cfg_dir / "reward").is_dir() else "reward_model"


def find_dapo_tree(*candidates):
    """The DAPO config dir inside a verl source tree or a verl-recipe checkout, or None."""
    for base in candidates:
        if not base:
            continue
        base = Path(base).expanduser()
        for sub in ("recipe/dapo/config", "dapo/config"):
            if (base / sub).is_dir():
                return base / sub
    return None


def _compose(config_dir: Path, name: str, overrides: list):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            return compose(config_name=name, overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def _compose_error(exc: Exception, source: str) -> Finding:
    from hydra.errors import HydraException

    text = str(exc).strip() or type(exc).__name__
    group = _group_options(text)
    if group is not None:
        name, value, options = group
        return finding("compose", ERROR, (name.replace("/", "."),),
                       f"composing {source} failed: config group '{name}' has no option '{value}' (options in the "
                       f"installed verl: {', '.join(options) or 'none'})",
                       f"write {name.replace('/', '.')}=<one of: {', '.join(options)}> (a config group takes an "
                       "option name, not +key=value), or drop the override if the recipe targets another verl")
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause).strip() and str(cause).strip() not in text:
        text += f" ({str(cause).strip().splitlines()[0]})"
    keys = tuple(sorted({w.strip("'\".,").lstrip("+~") for w in text.split()
                         if "." in w and "=" not in w and w.strip("'\".,").replace("_", "").replace(".", "").isalnum()
                         and not w.strip("'\".,").replace(".", "").isdigit()}))[:4]
    fix = ("a key that is not in verl's config needs '+key=value' (or '++key=value' to add or override); "
           "check the spelling against the installed verl's config")
    if "Could not override" in text or "Key '" in text:
        fix = "to add a key verl's config does not have, write it as +key=value; otherwise fix the spelling"
    if "Could not append" in text:
        fix = "the key already exists in verl's config: drop the '+' (or use '++' to work with any verl version)"
    for key in keys:
        if key.rsplit(".", 1)[-1] in _REMOVED:
            fix = _REMOVED[key.rsplit(".", 1)[-1]].format(version=verl_install.version())
    if not isinstance(exc, HydraException):
        text = f"{type(exc).__name__}: {text}"
    return finding("compose", ERROR, keys, f"composing {source} failed: {text.splitlines()[0]}"
                   + ("" if len(text.splitlines()) == 1 else " " + " ".join(text.splitlines()[1:3])), fix)


def compose_launch(launch, verl_src=None) -> Composed:
    verl_cfg = verl_config_dir()
    findings = []
    if launch.is_dapo:
        name = launch.config_name or "dapo_trainer"
        tree = find_dapo_tree(verl_src, launch.cwd)
        if tree is not None and (tree / f"{name}.yaml").is_file():
            source = f"DAPO config {tree / name}.yaml over the installed verl's {verl_cfg}"
            overrides = list(launch.overrides) + [f"hydra.searchpath=[file://{verl_cfg}]"]
            return _try(tree, name, overrides, source, findings)
        layout = dapo_layout(verl_cfg)
        base = "ppo_megatron_trainer" if "megatron" in name else "ppo_trainer"
        source = (f"installed verl's {base} + DAPO's keys ({layout}.* layout, matching the installed verl); "
                  "no DAPO tree given: pass --verl-src to compose DAPO's own config")
        findings.append(finding("compose", INFO, (), f"DAPO composed without DAPO's config files: {source}",
                                "pass --verl-src VERL_SOURCE_OR_VERL_RECIPE_CHECKOUT for an exact check"))
        with tempfile.TemporaryDirectory(prefix="va-dapo-") as tmp:
            doc = {"defaults": [base, "_self_"]}
            doc.update(OmegaConf.to_container(OmegaConf.merge(_DAPO_COMMON, _DAPO_REWARD[layout])))
            Path(tmp, f"{name}.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(doc)))
            overrides = list(launch.overrides) + [f"hydra.searchpath=[file://{verl_cfg}]"]
            return _try(Path(tmp), name, overrides, source, findings)
    name = launch.config_name or "ppo_trainer"
    if Path(launch.config_path).is_absolute():
        cfg_dir = Path(launch.config_path)
    elif launch.module.endswith(".py"):
        cfg_dir = Path(launch.cwd, launch.module).parent / launch.config_path
    elif launch.module.startswith("verl."):
        package = verl_cfg.parent.parent  # site-packages/verl
        cfg_dir = package.joinpath(*launch.module.split(".")[1:-1], launch.config_path)
    else:
        cfg_dir = Path(launch.cwd).joinpath(*launch.module.split(".")[:-1], launch.config_path)
    return _try(cfg_dir, name, list(launch.overrides), f"{cfg_dir / name}.yaml", findings)


def _try(cfg_dir, name, overrides, source, findings) -> Composed:
    if not Path(cfg_dir, f"{name}.yaml").is_file():
        findings.append(finding("compose", ERROR, (), f"config {name}.yaml not found in {cfg_dir}",
                                "fix --config-path/--config-name, or install the verl the recipe targets"))
        return Composed(None, source, findings)
    try:
        cfg = _compose(Path(cfg_dir), name, overrides)
    except Exception as exc:  # Hydra/OmegaConf raise many types; all are the user's config problem
        findings.append(_compose_error(exc, source))
        return Composed(None, source, findings)
    return Composed(cfg, source, findings)
