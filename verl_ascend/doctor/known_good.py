"""Known-good version sets for the rollout stack, as data with their source, and this node's mismatches.

vllm-ascend publishes which vLLM, CANN and PyTorch / torch_npu each of its releases was built and
tested with (its "Release compatibility matrix"). A node whose vllm / torch / torch_npu differ from
the row of its installed vllm-ascend is the version-mismatch failure users report most (import
errors, missing ops, `aclnn... error code is 561xxx`). The table is copied as data from the file
and commit named in SOURCE; add rows from newer releases of that file.

verl itself names one stack for its Ascend users (its install guide, VERL_SOURCE): the versions of
CANN, Python, torch / torch_npu, transformers, vLLM / vllm-ascend and Megatron / MindSpeed its NPU CI
and examples run. :func:`check_verl_stack` says where a node with verl 0.9.x departs from it.
"""

from verl_ascend.core.platform import without_local
from verl_ascend.core.stacks import VERL_SOURCE, VERL_STACK, VERL_STACK_FOR, stack_departures, stack_is_for

from .findings import ok, skip, warn

SOURCE = ("https://github.com/vllm-project/vllm-ascend/blob/182b75ea84ff13ece27b57391331ef8935410aea/"
          "docs/source/community/versioning_policy.md")
COLUMNS = ("vllm-ascend", "vllm", "cann", "torch", "torch_npu")
ROWS = (
    ("0.23.0", "0.23.0", "9.1.0", "2.10.0", "2.10.0.post4"),
    ("0.23.0rc1", "0.23.0", "9.0.1", "2.10.0", "2.10.0.post2"),
    ("0.22.1rc1", "0.22.1", "9.0.0", "2.10.0", "2.10.0"),
    ("0.21.0rc1", "0.21.0", "9.0.0", "2.10.0", "2.10.0"),
    ("0.20.2rc1", "0.20.2", "9.0.0", "2.10.0", "2.10.0"),
    ("0.19.1rc1", "0.19.1", "8.5.1", "2.9.0", "2.9.0"),
    ("0.18.0", "0.18.0", "8.5.1", "2.9.0", "2.9.0.post1+git4c901a4"),
    ("0.18.0rc1", "0.18.0", "8.5.1", "2.9.0", "2.9.0"),
    ("0.17.0rc1", "0.17.0", "8.5.1", "2.9.0", "2.9.0"),
    ("0.16.0rc1", "0.16.0", "8.5.1", "2.9.0", "2.9.0"),
    ("0.15.0rc1", "0.15.0", "8.5.0", "2.9.0", "2.9.0"),
    ("0.14.0rc1", "0.14.1", "8.5.0", "2.9.0", "2.9.0"),
    ("0.13.0rc3", "0.13.0", "8.5.1", "2.8.0", "2.8.0.post2"),
    ("0.13.0", "0.13.0", "8.5.0", "2.8.0", "2.8.0.post2"),
    ("0.13.0rc2", "0.13.0", "8.5.0", "2.8.0", "2.8.0.post1"),
    ("0.13.0rc1", "0.13.0", "8.3.RC2", "2.8.0", "2.8.0"),
    ("0.12.0rc1", "0.12.0", "8.3.RC2", "2.8.0", "2.8.0"),
    ("0.11.0", "0.11.0", "8.3.RC2", "2.7.1", "2.7.1.post1"),
    ("0.11.0rc3", "0.11.0", "8.3.RC2", "2.7.1", "2.7.1.post1"),
    ("0.11.0rc2", "0.11.0", "8.3.RC2", "2.7.1", "2.7.1"),
    ("0.11.0rc1", "0.11.0", "8.3.RC1", "2.7.1", "2.7.1"),
    ("0.11.0rc0", "0.11.0rc3", "8.2.RC1", "2.7.1", "2.7.1.dev20250724"),
    ("0.10.2rc1", "0.10.2", "8.2.RC1", "2.7.1", "2.7.1.dev20250724"),
    ("0.10.1rc1", "0.10.1", "8.2.RC1", "2.7.1", "2.7.1.dev20250724"),  # vllm 0.10.1 or 0.10.1.1
    ("0.10.0rc1", "0.10.0", "8.2.RC1", "2.7.1", "2.7.1.dev20250724"),
    ("0.9.2rc1", "0.9.2", "8.1.RC1", "2.5.1", "2.5.1.post1.dev20250619"),
    ("0.9.1", "0.9.1", "8.2.RC1", "2.5.1", "2.5.1.post1"),
    ("0.9.0rc2", "0.9.0", "8.1.RC1", "2.5.1", "2.5.1"),
    ("0.8.5rc1", "0.8.5.post1", "8.1.RC1", "2.5.1", "2.5.1"),
    ("0.7.3.post1", "0.7.3", "8.1.RC1", "2.5.1", "2.5.1"),
    ("0.7.3", "0.7.3", "8.1.RC1", "2.5.1", "2.5.1"),
)
ALSO_OK = {("0.10.1rc1", "vllm"): ("0.10.1.1",)}


def row_for(vllm_ascend: str):
    v = without_local(vllm_ascend)
    for row in ROWS:
        if row[0] == v:
            return dict(zip(COLUMNS, row))
    return None


def check(versions, cann_version="") -> list:
    """versions: dist name -> installed version ('' when absent) for vllm-ascend, vllm, torch, torch_npu
    (or torch-npu)."""
    va = versions.get("vllm-ascend", "")
    if not va:
        return [skip(check, "vllm-ascend not installed: no known-good row to compare against")]
    row = row_for(va)
    if row is None:
        return [skip(check, f"vllm-ascend {va} is not in the known-good table (rows {ROWS[-1][0]}..{ROWS[0][0]}, "
                     f"from {SOURCE})", "compare by hand with vllm-ascend's release compatibility matrix")]
    # doctor's facts name torch_npu by its distribution, torch-npu; the table's column is torch_npu
    have = dict(versions, cann=cann_version, torch_npu=versions.get("torch_npu") or versions.get("torch-npu", ""))
    wrong = []
    for column in ("vllm", "torch", "torch_npu", "cann"):
        got = without_local(have.get(column, "") or "")
        if not got:
            continue
        if got != row[column] and got not in ALSO_OK.get((row["vllm-ascend"], column), ()):
            wrong.append(f"{column} {got} (tested: {row[column]})")
    if not wrong:
        return [ok(check, f"vllm-ascend {va} with the versions it was released for")]
    want = ", ".join(f"{c} {row[c]}" for c in ("vllm", "torch", "torch_npu", "cann"))
    return [warn(check, f"vllm-ascend {va} was released for {want}; this node has " + "; ".join(wrong),
                 f"install the tested set (pip install vllm=={row['vllm']} torch=={row['torch']} "
                 f"torch-npu=={row['torch_npu']}, CANN {row['cann']}) or the vllm-ascend release matching what you "
                 f"have; table: {SOURCE}")]


def check_verl_stack(versions, python_version=None, ascend_host=False) -> list:
    """doctor versions.verl_stack: this node against the stack verl's install guide names for 0.9.x."""
    verl = versions.get("verl", "")
    if not verl:
        return [skip(check_verl_stack, "verl not installed: no verl-recommended stack to compare against")]
    if not stack_is_for(verl):
        return [skip(check_verl_stack, f"verl {verl}: verl's install guide names its current Ascend stack for verl "
                     f"{'.'.join(map(str, VERL_STACK_FOR))}.x ({VERL_SOURCE}); versions.known_good compares against "
                     "vllm-ascend's own row")]
    found = stack_departures(versions, python_version)
    departs = [text for text, _ in found]
    hard = [text for text, judged in found if judged]
    want = ", ".join(f"{k} {v}" for k, v in VERL_STACK.items())
    if not hard:
        return [ok(check_verl_stack, f"verl {verl} with the stack its install guide names"
                   + (f" ({'; '.join(departs)})" if departs else ""))]
    message = f"verl {verl}'s install guide names {want}; this environment has " + "; ".join(departs)
    fix = f"install the guide's versions (or know why not): {VERL_SOURCE}"
    if not ascend_host:  # a CPU or GPU machine has its own torch: said, not judged
        return [skip(check_verl_stack, message + " (not an Ascend node: not judged)", fix)]
    return [warn(check_verl_stack, message, fix)]
