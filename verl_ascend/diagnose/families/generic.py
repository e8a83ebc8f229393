"""The fallback: a failed run is never "no failure".

Any line that shows a run failed, and that no family above explains, becomes an ``unrecognised_failure``
finding: an uncaught Python exception (driver or worker, with or without Ray's ``(WorkerDict pid=...)``
prefix), a CANN / torch_npu ``[ERROR]`` line, an error code (``EZ9999``, ``EI0006``, ``ERR01100``...), a Ray
actor or worker death, a non-zero exit. Lines healthy runs print too are excluded here (``unless``): traceback
source lines (``raise KeyError(...)``), vLLM's engine-shutdown message, the import notice vllm-ascend used to log
at ERROR level, and exceptions printed inside Python's "Exception ignored in" shutdown block (the scanner skips
those by position).
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
_BENIGN = (r"died unexpectedly, shutting down client|Failed to import vllm_ascend_C|owner does not match|"
           r"Exception ignored in|exit(?:ed)? (?:with )?(?:code|status):? 0\b")
_UNLESS = _SOURCE + "|" + _BENIGN

RULES = (
    Rule(UNRECOGNISED, ("Error", "Exception", "Exit", "Interrupt"), EXCEPTION, unless=_UNLESS),
    Rule(UNRECOGNISED, ("[ERROR]",), r"\[ERROR\]", unless=_BENIGN),
    # no literal prefilter: SCAN_PATTERN already selects lines with a code, the pattern decides
    Rule(UNRECOGNISED, (), r"\bE[A-Z]\d{4}(?=[:\s(\]]|$)|\bERR\d{5}\b", unless=_BENIGN),
    Rule(UNRECOGNISED, ("died", "Died", "Worker exit type"),
         r"actor died unexpectedly|ActorDiedError|RayActorError|A worker died or was killed|"
         r"Worker exit type: (?:SYSTEM_ERROR|USER_ERROR|NODE_OUT_OF_MEMORY)|[Aa]ctor \S+ (?:has )?died", unless=_BENIGN),
    Rule(UNRECOGNISED, ("exit code", "exited with code", "exit status", "exitcode", "Killed", "Segmentation fault", "core dumped",
                        "Fatal Python", "SIGSEGV", "SIGABRT", "SIGKILL", "failed"),
         r"exit(?:ed)? (?:with )?(?:code|status)\s*[:=]?\s*-?[1-9]\d*|exitcode\s*:\s*-?[1-9]\d*|"
         r"non-zero exit status -?[1-9]|(?:^|\s)Killed(?:\s+\S*python|\s*$)|Segmentation fault|core dumped|"
         r"Fatal Python error|received signal SIG(?:SEGV|ABRT|KILL|BUS)|Signal \d+ \(SIG(?:SEGV|ABRT|KILL|BUS)\)|"
         r"Job '[^']+' failed", unless=_BENIGN),
)

# Python's interpreter-shutdown block: the exception printed within this many lines after it is destructor noise.
IGNORED_BLOCK = 12
IGNORED_START = "Exception ignored in"
