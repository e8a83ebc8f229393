"""Can verl's default trainer loop start in this environment? (verl 0.9: the v1 TransferQueue loop)"""

from verl_ascend.core import verl_install

from .findings import error, ok, skip

CHECK = "versions.trainer_loop"


def check() -> list:
    if verl_install.package_dir() is None:
        return [skip(CHECK, "verl is not installed in this environment", "pip install verl")]
    default = verl_install.v1_default()
    if default is None:
        return [ok(CHECK, f"verl {verl_install.version()} has one PPO loop (the Ray PPO trainer)")]
    if not default:
        return [ok(CHECK, f"verl {verl_install.version()} defaults to the Ray PPO trainer (trainer.use_v1=False)")]
    missing = verl_install.v1_missing()
    if not missing:
        return [ok(CHECK, f"verl {verl_install.version()}'s default v1 TransferQueue loop has its packages")]
    return [error(CHECK, f"verl {verl_install.version()} runs the v1 TransferQueue loop by default "
                  f"(trainer.use_v1=True), which imports {', '.join(missing)}: not installed, main_ppo fails at start-up",
                  verl_install.v1_install_hint(missing) + " on every node, or pass trainer.use_v1=False")]
