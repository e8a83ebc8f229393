"""CANN's error codes in a log, named with their official meaning and handling, each with the page it comes from.

Two kinds of code reach a verl log on Ascend:

- the message codes CANN prints (``EI0006: Getting socket times out``): a letter for the level, one for the
  module (I HCCL, J HCCP, L driver, E runtime, Z operators...), four digits; CANN's error-code reference has a page
  per code (symptom, cause, solution), and ``E*9999`` are every module's inner errors;
- the numeric return codes of the ACL / runtime API (``error code is 507035``, ``ret=107001``): the aclError page
  sets the meaning of each range (1xxxxx the environment or the calling code, 2xxxxx resources, 3xxxxx the
  service, 5xxxxx inner errors for technical support), CANN's runtime header names every code, and the aclnn page
  the operator API's 161xxx / 361xxx / 561xxx; HCCL's own result codes (``HCCL function error: ..., error code is
  9``) are the HcclResult enum of hccl_types.h.

Only what those public pages say is here: a code without a row is shown as the code alone (its range still gives
the handling for a numeric one). ``explain(code)`` gives ``{code, name, meaning, handling, source}``; ``find(text)``
the codes of a line.
"""

import re

_DOC = "https://www.hiascend.com/document/detail/"
_ERRCODE = _DOC + "zh/canncommercial/850/maintenref/troubleshooting/atlaserrorcode_15_"
_HCCLUG = _DOC + "en/canncommercial/850/commlib/hcclug/"
ACL_ERROR_PAGE = _DOC + "en/canncommercial/850/API/appdevgapi/aclcppdevg_03_1344.html"
ACLNN_PAGE = _DOC + "en/CANNCommunityEdition/910/API/aolapi/atlasascendc_api_07_1205.html"
RT_HEADER = "https://github.com/hicann/runtime/blob/master/include/external/acl/error_codes/rt_error_codes.h"
HCCL_TYPES = "https://github.com/hicann/hcomm/blob/master/include/hccl/hccl_types.h"
INNER_PAGE = _DOC + "zh/canncommercial/800/developmentguide/maintenref/troubleshooting/atlaserrorcode_15_0314.html"
AICORE_PAGE = _DOC + "zh/canncommercial/latest/maintenref/troubleshooting/troubleshooting_0004.html"

# message codes: code -> (name, meaning, handling, page)
MESSAGE = {
    "EI0001": ("HCCL environment variable", "an HCCL environment variable is set to a value HCCL rejects",
               "the message and the CANN log name the variable and its valid range: set it within that range",
               _DOC + "en/CANNCommunityEdition/900/API/hcclug/hcclug_000029.html"),
    "EI0002": ("Communication_Error_Timeout", "the Notify register's wait timed out: a collective waited for a peer "
               "rank (named in the message) longer than HCCL_EXEC_TIMEOUT (1800 s by default)",
               "look first at ranks that reported other errors earlier; if every rank reports it, compare the report "
               "times (more than the timeout apart: a late rank, or raise HCCL_EXEC_TIMEOUT); every NPU must get "
               "the same number of samples; `grep -rn 'error cqe'` in the plog for a network fault",
               _DOC + "zh/canncommercial/900/maintenref/troubleshooting/atlaserrorcode_15_0242.html"),
    "EI0006": ("Communication_Error_Get_Socket", "getting a socket timed out while the ranks set up their links",
               "look at ranks with other errors or none; if every NPU reports it and the reports are further apart "
               "than the connect timeout (120 s by default), raise HCCL_CONNECT_TIMEOUT; else check the link between "
               "the nodes (`hccn_tool -i $devid -tls -g` on each NPU)",
               _DOC + "zh/CANNCommunityEdition/850/maintenref/troubleshooting/atlaserrorcode_15_0246.html"),
    "EI0008": ("HCCL version mismatch", "the HCCL versions of the two ends of a link differ",
               "install the same CANN toolkit on every node",
               _DOC + "zh/canncommercial/900/maintenref/troubleshooting/atlaserrorcode_15_0248.html"),
    "EI0009": ("Transport init error", "a transport (link) between two ranks could not be initialised",
               "check the NPUs that report no error, and the NPU at the other end, for an abnormality",
               _DOC + "zh/CANNCommunityEdition/83RC1alpha003/maintenref/troubleshooting/atlaserrorcode_15_0249.html"),
    "EI0013": ("error CQE", "the device NIC reported an error completion (RoCE retransmissions exhausted)",
               "check the link and health of both devices named (`hccn_tool -link_stat / -net_health / -stat`)",
               _HCCLUG + "hcclug_000061.html"),
    "EI0014": ("TLS switch inconsistent", "the TLS switches of the ranks differ (CANN 8.5)",
               "make `hccn_tool -i $i -tls -g` equal on every NPU", _HCCLUG + "hcclug_000045.html"),
    "EI0015": ("topo exchange socket timeout", "a rank timed out creating a socket to the communicator's server "
               "(cluster negotiation at communicator creation)",
               "check the host network and port between the rank and the server; choose the NIC with "
               "HCCL_SOCKET_IFNAME", _HCCLUG + "hcclug_000037.html"),
    "EJ0001": ("HCCP_Process_Initialization_Failure", "the HCCP process could not start: the last training process "
               "may still be running", "kill the last training process, wait 10 s, try again",
               _ERRCODE + "0252.html"),
    "EL0004": ("Memory_Allocation_Failure", "memory a module asked for could not be allocated: not enough available",
               "free memory (close applications not in use; in a run: smaller batches or memory fractions)",
               _DOC + "en/CANNCommunityEdition/900/maintenref/troubleshooting/atlaserrorcode_15_0267.html"),
    "EE1002": ("Execution_Error_Stream_Synchronize_Timeout", "a stream synchronisation timed out",
               "check that the timeout is set properly and that the network is normal", _ERRCODE + "0181.html"),
}
# E?9999 (E19999 ... EZ9999): every module's inner error
INNER = ("Inner Error", "an inner error of that CANN module (for EZ9999 with `aicore` / `aivec error exception`: a "
         "kernel failed on the AI Core, see " + AICORE_PAGE + ")",
         "read the message lines around it to locate the fault; if it remains, collect the logs for technical support",
         INNER_PAGE)

# numeric codes: code -> (name, meaning); from the runtime header, the aclError page, the aclnn page
NUMERIC = {
    100000: ("ACL_ERROR_INVALID_PARAM", "parameter verification failed", ACL_ERROR_PAGE),
    100001: ("ACL_ERROR_UNINITIALIZE", "not initialized (aclInit not called first)", ACL_ERROR_PAGE),
    100002: ("ACL_ERROR_REPEAT_INITIALIZE", "repeated initialization or loading", ACL_ERROR_PAGE),
    500000: ("ACL_ERROR_INTERNAL_ERROR", "unknown internal error", ACL_ERROR_PAGE),
    500001: ("ACL_ERROR_FAILURE", "internal error", ACL_ERROR_PAGE),
    500002: ("ACL_ERROR_GE_FAILURE", "error of the GE (Graph Engine) module", ACL_ERROR_PAGE),
    500003: ("ACL_ERROR_RT_FAILURE", "error of the RUNTIME module", ACL_ERROR_PAGE),
    500004: ("ACL_ERROR_DRV_FAILURE", "error of the Driver module", ACL_ERROR_PAGE),
    161001: ("ACLNN_ERR_PARAM_NULLPTR", "parameter check: a null pointer", ACLNN_PAGE),
    161002: ("ACLNN_ERR_PARAM_INVALID", "parameter check: e.g. input dtypes that do not deduce", ACLNN_PAGE),
    361001: ("ACLNN_ERR_RUNTIME_ERROR", "a memory error calling the NPU runtime", ACLNN_PAGE),
    561000: ("ACLNN_ERR_INNER", "an inner error of the operator API", ACLNN_PAGE),
    561001: ("ACLNN_ERR_INNER_INFERSHAPE_ERROR", "inferring the output shape failed", ACLNN_PAGE),
    561002: ("ACLNN_ERR_INNER_TILING_ERROR", "tiling the NPU kernel failed", ACLNN_PAGE),
    561003: ("ACLNN_ERR_INNER_FIND_KERNEL_ERROR", "no NPU kernel found (the operator binary package may not be "
             "installed)", ACLNN_PAGE),
    561101: ("ACLNN_ERR_INNER_CREATE_EXECUTOR", "creating the aclOpExecutor failed (OS exception)", ACLNN_PAGE),
    561103: ("ACLNN_ERR_INNER_NULLPTR", "a null pointer inside the operator API", ACLNN_PAGE),
}
_RT = {  # rt_error_codes.h: the runtime's own comment for each code
    107000: ("PARAM_INVALID", "param invalid"), 107001: ("INVALID_DEVICEID", "invalid device id"),
    107002: ("CONTEXT_NULL", "current context null"), 107003: ("STREAM_CONTEXT", "stream not in current context"),
    107008: ("ADDR_UNALIGNED", "memory address unaligned"), 107009: ("FILE_OPEN", "open file failed"),
    107017: ("INVALID_HANDLE", "invalid handle"), 107019: ("WAIT_TIMEOUT", "wait timeout"),
    107020: ("TASK_TIMEOUT", "task timeout"), 107022: ("DEVICE_TASK_ABORT", "device task aborting"),
    107023: ("STREAM_ABORT", "stream aborting"),
    207000: ("FEATURE_NOT_SUPPORT", "feature not support"),
    207001: ("MEMORY_ALLOCATION", "memory allocation error, only used by out of memory"),
    207002: ("MEMORY_FREE", "memory free error"), 207003: ("AICORE_OVER_FLOW", "aicore over flow"),
    207004: ("NO_DEVICE", "no device"), 207005: ("RESOURCE_ALLOC_FAIL", "resource alloc fail"),
    207006: ("NO_PERMISSION", "no permission"), 207008: ("NO_STREAM_RESOURCE", "no stream resource"),
    207012: ("OVER_LIMIT", "over limit"), 207018: ("DEVICE_OOM", "device oom"), 207020: ("TIMEOUT", "driver timeout"),
    507000: ("INTERNAL_ERROR", "runtime internal error"), 507001: ("TS_ERROR", "ts internal error"),
    507010: ("LOST_HEARTBEAT", "ts lost heartbeat"), 507011: ("MODEL_EXECUTE", "model execute failed"),
    507012: ("REPORT_TIMEOUT", "report timeout"), 507013: ("SYS_DMA", "sys dma error"),
    507014: ("AICORE_TIMEOUT", "aicore timeout"), 507015: ("AICORE_EXCEPTION", "aicore exception"),
    507016: ("AICORE_TRAP_EXCEPTION", "aicore trap exception"), 507017: ("AICPU_TIMEOUT", "aicpu timeout"),
    507018: ("AICPU_EXCEPTION", "aicpu exception"), 507033: ("DEV_SETUP_ERROR", "device setup error"),
    507034: ("VECTOR_CORE_TIMEOUT", "vector core timeout"), 507035: ("VECTOR_CORE_EXCEPTION", "vector core exception"),
    507036: ("VECTOR_CORE_TRAP_EXCEPTION", "vector core trap exception"),
    507046: ("STREAM_SYNC_TIMEOUT", "stream sync time out"), 507047: ("EVENT_SYNC_TIMEOUT", "event sync time out"),
    507048: ("FFTS_PLUS_TIMEOUT", "ffts+ timeout"), 507049: ("FFTS_PLUS_EXCEPTION", "ffts+ exception"),
    507053: ("DEVICE_MEM_ERROR", "device MEM ERROR"), 507054: ("HBM_MULTI_BIT_ECC_ERROR", "hbm Multi-bit ECC error"),
    507055: ("SUSPECT_DEVICE_MEM_ERROR", "suspect device MEM ERROR"), 507056: ("LINK_ERROR", "link ERROR"),
    507057: ("SUSPECT_REMOTE_ERROR", "suspect remote ERROR"), 507899: ("DRV_INTERNAL_ERROR", "drv internal error"),
    507900: ("AICPU_INTERNAL_ERROR", "aicpu internal error"), 507901: ("SOCKET_CLOSE", "hdc disconnect"),
    507904: ("COMM_OP_RETRY_FAIL", "hccl operation retry failed"),
}
for _n, (_name, _meaning) in _RT.items():
    NUMERIC[_n] = ("ACL_ERROR_RT_" + _name, _meaning, RT_HEADER)
BY_NAME = {name: n for n, (name, _, _) in NUMERIC.items()}

# the aclError page's rule for each range of numeric codes: what kind of fault, what to do
RANGES = {
    1: "the environment or the calling code (fix the environment or the code logic)",
    2: "resources (stream, memory, ...) or an API / argument the hardware does not support (use resources properly)",
    3: "the service (a queue full or empty, ...)",
    5: "an inner error of software or hardware (device execution failure ...) the user cannot fix: collect the logs "
       "(plog, device log) for technical support",
}
HCCL_RESULT = {  # HcclResult of hccl_types.h: "HCCL function error: ..., error code is N"
    1: ("HCCL_E_PARA", "parameter error"), 2: ("HCCL_E_PTR", "empty pointer"), 3: ("HCCL_E_MEMORY", "memory error"),
    4: ("HCCL_E_INTERNAL", "internal error"), 5: ("HCCL_E_NOT_SUPPORT", "not support feature"),
    6: ("HCCL_E_NOT_FOUND", "not found specific resource"), 7: ("HCCL_E_UNAVAIL", "resource unavailable"),
    8: ("HCCL_E_SYSCALL", "call system interface error"), 9: ("HCCL_E_TIMEOUT", "timeout"),
    10: ("HCCL_E_OPEN_FILE_FAILURE", "open file fail"), 11: ("HCCL_E_TCP_CONNECT", "tcp connect fail"),
    12: ("HCCL_E_ROCE_CONNECT", "roce connect fail"), 13: ("HCCL_E_TCP_TRANSFER", "tcp transfer fail"),
    14: ("HCCL_E_ROCE_TRANSFER", "roce transfer fail"), 15: ("HCCL_E_RUNTIME", "call runtime api fail"),
    16: ("HCCL_E_DRV", "call driver api fail"), 17: ("HCCL_E_PROFILING", "call profiling api fail"),
    18: ("HCCL_E_CCE", "call cce api fail"), 19: ("HCCL_E_NETWORK", "call network api fail"),
    20: ("HCCL_E_AGAIN", "try again"), 21: ("HCCL_E_REMOTE", "error cqe"),
    22: ("HCCL_E_SUSPENDING", "error communicator suspending"), 23: ("HCCL_E_OPRETRY_FAIL", "retry constraint"),
    24: ("HCCL_E_OOM", "out of memory"),
}

_MESSAGE_CODE = re.compile(r"\b(E[A-Z0-9]\d{4})\b")
# a six-digit ACL / runtime / aclnn code after the words logs put before it
_NUMBER = re.compile(r"(?:error ?code|ErrCode|error_code|errno|ret(?:urn)?(?:\s*code)?|result)\s*(?:is|=|:|\[)?\s*"
                     r"\[?([1-5]\d{5})\b", re.IGNORECASE)
_ACL_NAME = re.compile(r"\b(ACL(?:NN)?_ERR\w+)\b")
_HCCL_CODE = re.compile(r"error code is (\d{1,2})\b")


def explain(code) -> dict:
    """``{code, name, meaning, handling, source}`` for a code a log printed (``EI0006``, ``507035``,
    ``ACL_ERROR_RT_AICORE_EXCEPTION``, ``HCCL 9``); the fields the public pages do not give are absent."""
    text = str(code)
    if text in MESSAGE:
        name, meaning, handling, source = MESSAGE[text]
        return {"code": text, "name": name, "meaning": meaning, "handling": handling, "source": source}
    if re.fullmatch(r"E[A-Z0-9]9999", text):
        name, meaning, handling, source = INNER
        return {"code": text, "name": name, "meaning": meaning, "handling": handling, "source": source}
    if text.startswith("HCCL "):
        n = int(text.split()[1])
        name, meaning = HCCL_RESULT.get(n, (None, None))
        return {"code": text, **({"name": name, "meaning": meaning, "source": HCCL_TYPES} if name else {})}
    n = BY_NAME.get(text) if not text.isdigit() else int(text)
    if n is None:
        return {"code": text}
    out = {"code": str(n)}
    if n in NUMERIC:
        name, meaning, source = NUMERIC[n]
        out.update(name=name, meaning=meaning, source=source)
    if n // 100000 in RANGES:
        out["handling"] = RANGES[n // 100000]
        out.setdefault("source", ACL_ERROR_PAGE)
    return out


def find(text: str) -> list:
    """The codes one log line names, as :func:`explain` takes them: message codes, six-digit ACL / runtime codes
    after ``error code`` / ``ret`` / ``ErrCode``, ACL error names, and HCCL's result code on an HCCL line."""
    found = list(dict.fromkeys(_MESSAGE_CODE.findall(text)))
    for m in _NUMBER.finditer(text):
        if m.group(1) not in found:
            found.append(m.group(1))
    for m in _ACL_NAME.finditer(text):
        n = BY_NAME.get(m.group(1))
        if n is not None and str(n) not in found:
            found.append(str(n))
    if "HCCL" in text or "hccl" in text:
        for m in _HCCL_CODE.finditer(text):
            found.append(f"HCCL {m.group(1)}")
    return found


def known(code: str) -> bool:
    """Whether the table has a meaning for this code (a row, an inner error, an HCCL result)."""
    return "meaning" in explain(code)
