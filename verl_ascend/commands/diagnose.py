"""`verl-ascend diagnose PATH... [--json]`: the first failing rank, the cause and the fix, from a failed run's logs."""


def run(args) -> int:
    from verl_ascend.diagnose import report

    return report.run(args.paths, as_json=args.json, verbose=args.verbose)  # scan.BadInput: cli.main, exit 2


def register(sub) -> None:
    p = sub.add_parser(
        "diagnose",
        help="read a failed run's logs: which rank failed first, why, and what to change",
        description="Streams driver logs, Ray worker logs, a Ray session's logs folder or CANN's plog folder "
        "(~/ascend/log/debug/plog) and matches the failure families of verl on Ascend documented in public "
        "catalogues (CANN's HCCL fault chapter, torch_npu troubleshooting, vllm-ascend's and verl's NPU FAQs, issue "
        "threads): HCCL link setup, timeouts and the peer that exited, ports taken, TLS switches, error CQE / RoCE, "
        "version mismatch, wrong NIC, device network, CANN not sourced, NPU out of memory, AI Core and operator "
        "errors, Ray without NPUs or rewriting ASCEND_RT_VISIBLE_DEVICES, verl's weight bucket, MindSpeed too old, "
        "checkpoint metadata missing on other nodes, host OOM kills, and more. A failure no family explains is "
        "still reported (unrecognised failure: any uncaught exception, CANN [ERROR] line, error code, dead actor "
        "or non-zero exit) with its first line, file:line and process. For each finding: the codes, the earliest "
        "failing rank / node / device by timestamp across all files, the likely cause, the fix (variables, "
        "hccn_tool / npu-smi commands) and the public source it comes from. Warnings, retries and shutdown noise "
        "are ignored. The run is read as a timeline: step lines, validation, checkpoint saves and the end of "
        "training are read too; an error the run went on after is a note, errors after the end are shutdown noise "
        "(unless the job then exits non-zero), and the headline is the first error the run did not survive. "
        "Exit 0 when no failure is found, 1 when failures are found, 2 on bad input.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="log files or folders (read recursively)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (the envelope every command prints: schema, command, exit_code, "
                   "findings; then files, lines, first_failure, ...)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also list the error lines that are not the failure: those the run went on after (handled) "
                   "and those printed after its end (shutdown noise)")
    p.set_defaults(func=run)
