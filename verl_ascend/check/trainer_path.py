"""Which trainer loop a composed config runs on the installed verl, and what that loop needs here
(facts from :mod:`verl_ascend.core.verl_install`: the installed verl's config and package metadata)."""

from verl_ascend.core import verl_install
from verl_ascend.core.findings import INFO, WARNING, Finding, finding
from verl_ascend.recipe.layout import get


def findings(cfg, verl_version: str) -> tuple:
    """(name of the loop, [Finding])."""
    if "use_v1" not in (cfg.get("trainer") or {}):
        return "Ray PPO trainer (the only one in this verl)", []
    if not get(cfg, "trainer.use_v1", False):
        return "Ray PPO trainer (trainer.use_v1=False)", []
    name = "v1 TransferQueue trainer (trainer.use_v1=True)"
    missing = verl_install.v1_missing()
    if not missing:
        return name, []
    fix = verl_install.v1_install_hint(missing) + ", or run the Ray PPO trainer with trainer.use_v1=False"
    return name, [finding("trainer", WARNING, ("trainer.use_v1",),
                          f"the recipe runs verl's {name}; it imports {', '.join(missing)}, not installed in this "
                          "environment: where the cluster's environment matches this one, main_ppo fails at start-up",
                          fix)]


def engine_workers(cfg) -> bool:
    """Does the run use verl's engine workers (``engine_workers.py``) rather than the legacy FSDP/Megatron
    workers (``fsdp_workers.py``)? By what the installed verl has: a verl with only one kind runs it
    (0.9 has no legacy workers); with both, main_ppo picks the legacy ones unless
    ``trainer.use_legacy_worker_impl=disable``."""
    root = verl_install.package_dir()
    if root is None:
        return False
    legacy = (root / "workers" / "fsdp_workers.py").is_file()
    engine = (root / "workers" / "engine_workers.py").is_file() or (root / "workers" / "roles").is_dir()
    if legacy and engine:
        return str(get(cfg, "trainer.use_legacy_worker_impl", "auto")) == "disable"
    return engine


def describe(name: str) -> Finding:
    return finding("trainer", INFO, ("trainer.use_v1",), f"trainer loop: {name}")
