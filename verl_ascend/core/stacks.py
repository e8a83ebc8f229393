"""The Ascend stack verl's own install guide names, as data with its source, and where an environment departs.

verl documents one set of versions for its NPU users (CANN, Python, torch / torch_npu, transformers,
vLLM / vllm-ascend, Megatron / MindSpeed): what its NPU CI and examples run. ``doctor`` judges a node
against it (versions.verl_stack) and ``status`` prints the departures; both read it here. Metadata
only: nothing is imported to compare.
"""

from verl_ascend.core import platform

# verl's recommended Ascend stack for a vLLM rollout with FSDP or Megatron: its install guide as of
# 2026-08-03 (the vLLM / vllm-ascend 0.23.0 update), which is what verl 0.9.x (0.9.1: 2026-09-20) users
# follow. Megatron-LM and MindSpeed are named by branch (core_r0.16.0), so only megatron-core's
# major.minor is compared; MindSpeed is installed from source under versions that do not name it.
VERL_SOURCE = ("https://github.com/verl-project/verl/blob/1dda039b9c6311889a9c9a26040677e1254814f9/"
               "docs/ascend_tutorial/get_start/install_guidance.rst")
VERL_STACK_FOR = (0, 9)  # verl releases the guide's current stack is for (major, minor)
VERL_STACK = {
    "python": "3.12",  # accepted: >= 3.10, < 3.13
    "cann": "9.1.0",
    "torch": "2.10.0",
    "torch_npu": "2.10.0.post4",
    "transformers": "5.10.4",
    "vllm": "0.23.0",
    "vllm-ascend": "0.23.0",
    "megatron-core": "0.16",
}
PYTHON_ACCEPTED = ((3, 10), (3, 12))


def stack_departures(versions, python=None) -> list:
    """Where this environment departs from VERL_STACK: [(text, judged), ...], e.g. ('torch 2.13.0 (guide: 2.10.0)',
    True). A package that is not installed is not a departure (a login node has no torch_npu). Python outside the
    range the guide accepts is judged; inside it but not the recommended one it is only named (judged False)."""
    have = dict(versions, torch_npu=versions.get("torch_npu") or versions.get("torch-npu", ""))
    found = []
    if python is not None:
        got = tuple(python[:2])
        text = ".".join(map(str, got))
        if not PYTHON_ACCEPTED[0] <= got <= PYTHON_ACCEPTED[1]:
            found.append((f"python {text} (guide: {VERL_STACK['python']}, accepts 3.10-3.12)", True))
        elif text != VERL_STACK["python"]:
            found.append((f"python {text} (guide recommends {VERL_STACK['python']}; 3.10-3.12 accepted)", False))
    for name, want in VERL_STACK.items():
        got = platform.without_local(have.get(name, "") or "")
        if name == "python" or not got:  # the CANN version is not read here: it is named, not compared
            continue
        same = got.startswith(want + ".") or got == want if name == "megatron-core" else got == want
        if not same:
            found.append((f"{name} {got} (guide: {want})", True))
    return found


def stack_is_for(verl_version: str) -> bool:
    """Whether the guide's current stack is the one for this verl release."""
    return tuple((platform.release(verl_version or "0") or (0, 0, 0))[:2]) == VERL_STACK_FOR
