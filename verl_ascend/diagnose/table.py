"""The knowledge of `verl-ascend diagnose`, as data: message shape -> family -> cause -> fix -> public source.

One ``Rule`` per message shape. ``keywords`` are literal substrings of which one must be in a line
before its ``pattern`` is tried (they also let the scanner skip whole chunks that hold none of
them). A family is one root cause; several rules may feed it. ``FAMILIES`` gives each family its
title, cause, fix and the public threads / documents it was written from; ``order`` puts causes
before their symptoms (a socket timeout is usually the echo of a wrong NIC or a late rank).

To add a message: append a Rule (and a family if it is a new cause), then a log excerpt of that
shape to tests/fixtures/diagnose/ with its expected family in tests/unit/test_diagnose.py.
"""

import re

from . import anchors, component, timeline
from .families import FAMILIES, HCCL_RESULT, RULES, UNRECOGNISED, Family, Rule  # noqa: F401  (the table's public names)

# Lines that are evidence, not failures: read on every line whatever its level.
EVIDENCE = {
    "rollout": re.compile(r"generate_sequences|No available shared memory broadcast block found"),
    "tls": re.compile(r"TLS SWITCH \((\d)\)|tls switch\[(\d)\]"),
    # verl's trainer (v1 and legacy) on a save, and on a start that found no checkpoint to resume from
    "saved": re.compile(r"Saving checkpoint to (\S+)/global_step_(\d+)"),
    "scratch": re.compile(r"Training from scratch"),
}
# What the scanner looks for in whole blocks before reading lines: every rule / evidence keyword contains one of
# SCAN_ANCHORS (tests/unit/test_diagnose.py checks it); the one rule without keywords (the error-code fallback)
# relies on SCAN_CODES selecting its lines. anchors.build turns them into one RE2 pattern of a line holding any of
# them (SCAN_PATTERN), searched in whole blocks by pyarrow's RE2, and the same alternation for Python's re
# (SCAN_REGEX), which scans the first few MB (anchors.select). A line they select is then checked against each
# rule's own keywords and pattern.
# CANN / torch_npu codes; glog [E...] lines; Ray's C++ log lines at E / C / F ("... 06:54:54,934 C 756 756]")
SCAN_CODES = {"E": r"[A-Z0-9]\d{4}|RR\d{5}", "[": r"[EF]\d{4} \d\d:", ",": r"\d{3} [ECF] \d+ \d+\]"}
SCAN_ANCHORS = (
    "EADDRINUSE", "ERROR] HCCL", "Expected all", "Expects tensor", "HCCL function", "HCCL_SOCKET", "HCCL_IF",
    "HCCL versions", "GLOO_SOCKET", "NPU function", "NPU out of", "NPU device", "Synchronize", "Getting socket",
    "Failed to ", "Too many open", "PlatformNPU", "The following resource", "The aicore", "The vector core",
    "No available node", "No available shared", "Total available GPUs", "Address already", "TLS SWITCH", "TLS switch",
    "Gloo connectFullMesh", "Transport init", "ACL_ERROR", "Watchdog caught", "Remote Rank", "RankID:",
    "Unable to find address", "Cluster Exception", "Recv unmatched", "ROCE CQE", "ROCE_CQE", "Some ranks tls",
    "Cannot find bin", "AclSetCompileopt", "MLA only", "Tensors must", "InvalidVersion", "Invalid device ID",
    "Worker exit type", "Killed", "Segmentation", "Fatal Python", "SIGSEGV", "SIGABRT", "SIGKILL", "SIGBUS", "Job '",
    ".so: cannot", "port[", "tls switch[", "generate_sequences", "status[LOST]", "status[STUCK]", "error cqe",
    "has no NPU available", "running low on memory", "too large to fit", "update_weights_bucket_megabytes",
    "_layernorm", "common.pt", ".metadata", "metadata.json", "modified by an inplace", "Error", "Exception", "Exit",
    "Interrupt", "[ERROR]", "died", "Died", "exit code", "exit status", "exitcode", "core dumped", "failed",
    "NPU device is not available",
    # the failures every verl run meets (families/common.py) whose lines hold none of the above
    "Could not override", "is not in struct", "Missing mandatory value", "omegaconf.errors", "No such file",
    "Unable to find", "can't start new thread", "pthread_create", "Resource temporarily unavailable",
    "not a valid model identifier", "does not appear to have a file", "size mismatch for", "state_dict",
    "divisible by", "timed out in blocking wait", "Timed out waiting", "System memory low at node",
    "cannot be scheduled right now", "placement group", "could not find a node type", "ACL stream synchronize failed",
    "client socket has", "via c10d key-value store", "killed due to memory pressure", "has been marked dead",
    "is not a distributed checkpoint", "exited with code",
    "Saving checkpoint to", "Training from scratch",
    # #46: every line that shows a failed run (families/generic.py), the CUDA path on Ascend (families/device.py)
    "ERROR", "CRITICAL", "FATAL", "Traceback (most", "    raise", "    assert", "Aborted", "terminate called",
    "fatal signal", "Connection refused", "No route to host", "Network is unreachable", "GCS", "raylet",
    "not compiled with CUDA", "NVIDIA driver", "torch.cuda.is_available() is False", "NCCL built in",
    "ProcessGroupNCCL is only", "any binary", "Some NCCL operations",
    # #46 round 2: Ray's gRPC clients (generic.py), a library of another torch_npu / CANN set (device.py), HCCL's
    # task timeout as the device reports it (core.py)
    "to become available", "has been unavailable for", "undefined symbol",
    "fftsplus task timeout") + timeline.PROGRESS_ANCHORS + component.VERSION_ANCHORS
SCAN_PATTERN, SCAN_REGEX = anchors.build(SCAN_ANCHORS, SCAN_CODES)
# verl's step lines are evidence and only the last one counts: the scanner looks for it with one rfind per block
STEP_KEY = "timing_s/gen:"
EVIDENCE_KEYWORDS = ("generate_sequences", "No available shared memory broadcast block", "TLS SWITCH", "tls switch[",
                     "Saving checkpoint to", "Training from scratch",
                     "timing_s/gen:")
