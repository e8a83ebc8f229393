"""`verl-ascend check RECIPE.sh`: preflight a verl launch script before booking the cluster."""

_HELP = """Run RECIPE.sh under bash inside a sandbox (user namespaces, through bubblewrap when it is on PATH,
else made by check itself: no host process
visible, host files read-only, private /tmp and $HOME, no network) with python/ray replaced by
recorders and commands with side effects (pkill, kill, rm, pip, curl, ray stop, sleep, ulimit, ...)
skipped and listed, so nothing is trained and nothing on this machine changes. Then compose the
trainer call's Hydra overrides with the installed verl's config, run verl's own validation (offline),
then the Ascend A2 preflight rules (parallel sizes vs world size, batch divisibility, lengths,
pipeline layer split, heads/experts vs TP/EP, HBM per rank of the --device profile (A2 card, A3 die), known-bad combinations).
The script runs from the current directory, as `bash RECIPE.sh` would.
Exit 0 = clean, 1 = warnings only, 2 = errors, or no sandbox on this host (the recipe is not run)."""


def register(sub) -> None:
    p = sub.add_parser("check", help="check a recipe script against the installed verl (no NPU needed)",
                       description=_HELP)
    p.add_argument("recipe", metavar="RECIPE.sh", help="bash script that launches python -m verl.trainer.main_ppo "
                   "(or recipe.dapo.main_dapo)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Hydra override appended after the script's (repeatable), e.g. --set trainer.nnodes=8")
    p.add_argument("--verl-src", metavar="DIR", default=None,
                   help="verl source tree (with recipe/dapo) or verl-recipe checkout: compose DAPO's own config; "
                   "also exported to the script as VERL_SRC")
    from verl_ascend.core.profiles import DEFAULT, PROFILES

    p.add_argument("--device", choices=sorted(PROFILES), default=DEFAULT,
                   help="what one rank runs on: " + "; ".join(f"{k} = {v.title}" for k, v in PROFILES.items())
                   + f" (default {DEFAULT}); memory figures are per card, or per die on a3")
    p.add_argument("--cann", metavar="VERSION", default="",
                   help="the cluster's CANN version, e.g. 8.5.0 (rules that depend on it, such as roce, otherwise "
                   "read it from the toolkit the script's environment points at, or say when they apply)")
    p.set_defaults(func=run)


def run(args) -> int:
    from verl_ascend.check.report import check

    report = check(args.recipe, args.sets, args.verl_src, device=args.device, cann=args.cann)  # BadInput: cli.main, exit 2
    print(report.to_json() if args.json else report.text())
    return report.exit_code
