"""``verl-ascend bridge NAME``: the main_ppo overrides that select a Megatron bridge on the installed verl."""

from verl_ascend.core import findings


def run(args) -> int:
    from verl_ascend.core import verl_install

    if verl_install.package_dir() is None:
        raise findings.BadInput("verl is not installed in this Python environment (pip install verl)")
    try:
        lines = verl_install.bridge_overrides(args.name)
    except ValueError as exc:
        raise findings.BadInput(f"{exc}. Fix: MEGATRON_BRIDGE=mbridge (recipes/megatron_bridge.sh)") from None
    for line in lines:
        print(line)
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "bridge",
        help="print the overrides that select a Megatron bridge on the installed verl (for launch scripts)",
        description="Prints one main_ppo override per line that makes the installed verl build its Megatron "
        "models through NAME: on verl >= 0.8 actor_rollout_ref.actor.megatron.vanilla_mbridge=True (mbridge) or "
        "=False (Megatron-Bridge); on older verls nothing for mbridge, their only bridge. Read from verl's files, "
        "nothing imported. recipes/megatron_bridge.sh calls it for MEGATRON_BRIDGE. Exit 0 printed, 2 bad input (an unknown "
        "bridge, Megatron-Bridge on a verl without the switch, no verl).",
    )
    p.add_argument("name", metavar="NAME", help="mbridge or megatron-bridge: the bridge the launch script builds through")
    p.set_defaults(func=run)
