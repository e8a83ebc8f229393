"""`verl-ascend patches check`: do the upstream-ready diffs fit a source tree (verl_ascend/diffs/check.py)."""

from verl_ascend.diffs.check import PROJECTS, patches_dir


def run(args) -> int:
    from verl_ascend.diffs import check

    return check.run(args.diffs, args.project, args.source, as_json=args.json)


def register(sub) -> None:
    p = sub.add_parser(
        "patches",
        help="upstream-ready diffs of the runtime fixes: do they apply to a source tree?",
        description="The runtime fixes also ship as unified diffs (patches/<project>/<version>/<fix>.patch) "
        "for images that bake their software and for upstreaming. `check` tells per diff whether it "
        "applies, is already applied, is obsolete, or does not apply.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    c = actions.add_parser(
        "check",
        help="check every diff against the installed (or given) verl / torch source",
        description="For each diff made for the tree's version: applies / already applied / obsolete / "
        "does not apply. A tree whose version has no diffs gets a warning and every diff is tried. "
        "Exit 0 all good, 1 a diff does not apply or the version has no diffs, 2 bad input.",
    )
    c.add_argument("--source", metavar="DIR", help="directory holding verl/ or torch/ (a checkout or "
                   "site-packages); default: the installed packages")
    c.add_argument("--project", choices=PROJECTS, help="check only this project")
    c.add_argument("--diffs", metavar="DIR",
                   help=f"directory of <project>/<version>/<fix>.patch (default: {patches_dir()})")
    c.add_argument("--json", action="store_true", help="print the reports as JSON")
    c.set_defaults(func=run)
