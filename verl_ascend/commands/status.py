"""`verl-ascend status`: what the plugin did in this environment (verl_ascend/core/status.py)."""

from verl_ascend.commands._args import comma_names


def run(args) -> int:
    from verl_ascend.core import status

    return status.run(only=args.patch, import_targets=not args.no_import, as_json=args.json)


def register(sub) -> None:
    p = sub.add_parser(
        "status",
        help="show versions, the detected device and every patch's state in this environment",
        description="Imports verl (and each patch's target module) in this process and reports what "
        "verl-ascend did: applied / not applicable (why) / disabled / failed (the exception). "
        "Exit 1 when a patch failed, another package replaced what a patch installed (overridden), or a "
        "VERL_ASCEND* setting is invalid; 2 when verl (or torch) does not import.",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-import", action="store_true", help="only import verl, not every patch target")
    p.add_argument("--patch", action="extend", type=comma_names, default=[], metavar="NAME[,NAME]",
                   help="only these patches: import their targets alone (faster than every target) and show "
                        "only them; repeatable")
    p.set_defaults(func=run)
