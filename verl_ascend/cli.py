"""``verl-ascend``: command-line entry. Parses arguments and calls the features."""

import argparse
import json
import sys


def _cmd_status(args) -> int:
    from . import status

    report = status.collect(import_targets=not args.no_import)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(status.render(report))
    failed = [p["name"] for p in report["patches"] if p["state"] == "failed"]
    return 1 if failed or report["verl_import_error"] else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verl-ascend",
        description="Run verl on Huawei Ascend NPU clusters: status of the runtime patches, recipe checks, tools.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "status",
        help="show versions, the detected device and every patch's state in this environment",
        description="Imports verl (and each patch's target module) in this process and reports what "
        "verl-ascend did: applied / not applicable (why) / disabled / failed (the exception). "
        "Exit 1 when a patch failed or verl does not import.",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-import", action="store_true", help="only import verl, not every patch target")
    p.set_defaults(func=_cmd_status)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
