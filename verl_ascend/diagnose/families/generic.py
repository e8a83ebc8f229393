"""The fallback: a failed run is never "no failure".

Any line that shows a run failed, and that no family above explains, becomes an ``unrecognised_failure``
finding: an uncaught Python exception (driver or worker, with or without Ray's ``(WorkerDict pid=...)``
prefix), a traceback cut short (its frames end at a ``raise`` / ``assert`` line and no exception line follows),
a line logged at ERROR / CRITICAL (Python logging, vLLM, Ray, glog's ``[E...]``, CANN's ``[ERROR]``), an error
code (``EZ9999``, ``EI0006``, ``ERR01100``...), a Ray actor or worker death, an abort / core dump / signal death,
a non-zero exit, a process that could not reach its peers or the Ray head. Only traceback source lines that merely
quote a message are left out (``raise KeyError(...)``). Whether such a line failed the run is decided by where it
stands in the run (``timeline.py``: after the run's end, or followed by further progress, it did not); there is
no list of lines that are harmless wherever they appear.
"""

from .model import GH, Family, Rule

UNRECOGNISED = "unrecognised_failure"

FAMILIES = {f.id: f for f in (
    Family(
        UNRECOGNISED, 99, "Unrecognised failure",
        "The run failed (an uncaught exception, an [ERROR] line or error code, a dead actor or a non-zero exit) in a "
        "way none of the known families describes. The first such line, its process and the code location it was "
        "raised at are below.",
        "Read the first failing line and the `raised at` location: that process failed first, the later errors are "
        "usually its echo. Error codes: `grep -h ERROR ~/ascend/log/debug/plog/plog-<pid>_*.log` on that node; "
        "rerun with `export ASCEND_LAUNCH_BLOCKING=1` for the failing operator; report it with the log excerpt.",
        (GH + "verl-project/verl/issues", GH + "vllm-project/vllm-ascend/issues"),
    ),
)}

# A Python exception as a traceback's last line prints it: dotted CamelCase name ending in Error / Exception /
# Exit / Interrupt (or Ray's "RayTaskError(KeyError)"), then ": message" or the end of the line.
EXCEPTION = (r"(?:^|(?<=[\s:\]\)>]))((?:[a-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|Exception)"
             r"(?:\(\w+(?:\.\w+)*\))?)(?::(?:\s|$)|\s*$)")
# Source lines of a traceback and words around an exception name that only mention it.
_SOURCE = r"^\W*(?:\(\w+ pid=\d+[^)]*\)\s*)?(?:\[rank\d+\]:\s*)?\s*(?:raise|except|class|def|import|from|assert|return)\b"

# A line logged at ERROR / CRITICAL / FATAL: Python logging (" - ERROR - ", "ERROR:root:"), vLLM ("ERROR 06-01
# 10:00:00 [core.py:1]"), Ray ("<time>\tERROR worker.py:1 --"), glog ("[E1204 14:14:42.222 file.cpp:1]"), CANN ("[ERROR]")
_PREFIX = r"^\W*(?:\(\w+ pid=\d+[^)]*\)\s*)*(?:\[rank\d+\]:\s*)?"
LEVEL_ERROR = (_PREFIX + r"(?:\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]?\d*\]?\s+)?(?:ERROR|CRITICAL|FATAL)\b(?!_)|"
               r" - (?:ERROR|CRITICAL) - |\b(?:ERROR|CRITICAL):[\w.]+:|\d\d:\d\d:\d\d[,.]\d+\s+(?:ERROR|CRITICAL)\b|"
               r"\[(?:ERROR|CRITICAL|FATAL)\]|\b(?:ERROR|CRITICAL) \d\d-\d\d \d\d:|" + _PREFIX + r"\[[EF]\d{4} \d\d:\d\d:\d\d")
# A process that could not reach its peers or the Ray head. The second half is the wording of Ray's own gRPC clients
# (src/ray/rpc/retryable_grpc_client.cc, src/ray/gcs_rpc_client/gcs_client.cc and rpc_client.h): a request that waited
# past its deadline fails with "Timed out while waiting for <server> to become available." (<server> is "GCS",
# "Raylet <ip>" or "Core worker <ip>"), a server down past its reconnect timeout is "<server> has been unavailable for
# more than N seconds", and a client that never got the cluster id says "Failed to get cluster ID from GCS server".
RAY_SERVER = r"(?:GCS|Raylet \S+|Core worker \S+)"
UNREACHABLE = (r"Connection refused|No route to host|Network is unreachable|Failed to connect to (?:the )?GCS|"
               r"Unable to connect to (?:the )?GCS|Could not connect to (?:the )?(?:Ray|GCS)|(?:Couldn't|Could not) reconnect to GCS|"
               r"Failed to (?:connect to|register with) (?:the )?raylet|Failed to get the GCS address|"
               r"Timed out while waiting for " + RAY_SERVER + r" to become available|"
               + RAY_SERVER + r" has been unavailable for more than|Failed to get cluster ID from GCS")

RULES = (
    Rule(UNRECOGNISED, ("Error", "Exception", "Exit", "Interrupt"), EXCEPTION, unless=_SOURCE),
    Rule(UNRECOGNISED, ("ERROR", "CRITICAL", "FATAL"), LEVEL_ERROR),
    # glog's error / fatal lines of torch and torch_npu ("[E1204 14:14:42.222 ...", after any prefix a tool adds) and
    # Ray's own C++ log lines at E / C / F ("[2021-04-18 06:54:54,934 C 756 756]"): the scanner selects them by code
    Rule(UNRECOGNISED, (), r"(?:^|[\s:\]])\[[EF]\d{4} \d\d:\d\d:\d\d\.\d+|"
                           r"^\W*\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [ECF] \d+ \d+\]"),
    # no literal prefilter: SCAN_PATTERN already selects lines with a code, the pattern decides
    Rule(UNRECOGNISED, (), r"\bE[A-Z0-9]\d{4}(?=[:\s(\]]|$)|\bERR\d{5}\b"),
    Rule(UNRECOGNISED, ("died", "Died", "Worker exit type", "fatal signal"),
         r"actor died unexpectedly|ActorDiedError|RayActorError|A worker died or was killed|"
         r"Worker exit type: (?:SYSTEM_ERROR|USER_ERROR|NODE_OUT_OF_MEMORY)|[Aa]ctor \S+ (?:has )?died|"
         r"\bdied unexpectedly\b|\bprocess \S* ?(?:has )?died\b|Got fatal signal"),
    Rule(UNRECOGNISED, ("exit code", "exited with code", "exit status", "exitcode", "Killed", "Segmentation fault", "core dumped",
                        "Fatal Python", "SIGSEGV", "SIGABRT", "SIGKILL", "failed", "Aborted", "terminate called"),
         r"exit(?:ed)? (?:with )?(?:code|status)\s*[:=]?\s*-?[1-9]\d*|exitcode\s*:\s*-?[1-9]\d*|"
         r"non-zero exit status -?[1-9]|(?:^|\s)Killed(?:\s+\S*python|\s*$)|Segmentation fault|core dumped|"
         r"Fatal Python error|received signal SIG(?:SEGV|ABRT|KILL|BUS)|Signal \d+ \(SIG(?:SEGV|ABRT|KILL|BUS)\)|"
         r"Job '[^']+' failed|(?:^|\s|\d )Aborted(?: \(core dumped\))?(?:\s+\S*python|\s*$)|terminate called after throwing"),
    Rule(UNRECOGNISED, ("Connection refused", "No route to host", "Network is unreachable", "GCS", "raylet",
                        "to become available", "has been unavailable for"), UNREACHABLE, any_level=True),
)

# A traceback whose frames end at a `raise` / `assert` source line (or at its header) with no exception line after
# it, in the same process, within TRACEBACK_WINDOW lines: a traceback cut short (a log truncated by the user, a Ray
# worker killed while printing) is a failure too (scan.py keeps such lines open until an exception line closes them).
TRACEBACK_HEADER = "Traceback (most recent call last)"
TRACEBACK_SOURCE = (r"^(?:\(\w+ pid=\d+[^)]*\)\s*)*(?:\[rank\d+\]:\s*)?"
                    r"(?:(?:ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[?[\w.]+:\d+\]\s?)?\s{2,}(?:raise|assert)\b")
TRACEBACK_WINDOW = 400
CUT_SHORT = "traceback without its exception line"
