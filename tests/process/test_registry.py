"""The registry in fresh interpreters with every real patch: failures never break `import verl`, and
activating again and again applies each patch once. Its rules on their own: tests/unit/test_registry.py;
the post-import hook: tests/unit/test_hooks.py."""


import pytest
from subproc import clean_env, last_json, run_python

# Every registered patch is forced to raise, first in its probe, then (second run) in apply.
FAULTS = """
import json, sys
from verl_ascend.core import activation, registry
from verl_ascend.core import status
activation.activate(source="test")  # load the records now (the .pth only armed the triggers)
mode = sys.argv[1]
def boom(module):
    raise RuntimeError(f"injected fault in {mode}")
for name in registry.names():
    setattr(registry.get(name), mode, boom)
report = status.collect(import_targets=True)
import verl
import importlib.util
def missing(target):  # asked of the import system itself, not of status
    try:
        return importlib.util.find_spec(target) is None
    except ImportError:
        return True
absent = [n for n in registry.names() if all(missing(t) for t in registry.get(n).targets)]
print(json.dumps({"patches": report["patches"], "verl": verl.__version__,
                  "verl_error": report["verl_import_error"], "absent": absent}))
"""


@pytest.mark.parametrize("mode", ["applies", "apply"])
def test_every_patch_raising_leaves_verl_importable(mode):
    proc = run_python(FAULTS, env=clean_env(fake_npu=True), args=(mode,))
    out = last_json(proc)
    assert out["verl"] and out["verl_error"] is None
    failed, never_imported = set(), set()
    for patch in out["patches"]:
        reached = [row for row in patch["targets"] if row["state"] != "pending"]
        if not reached and patch["name"].startswith("rehearse_"):
            # status imports no target of a rehearsal-only record outside a rehearsal (megatron-core, FSDP2
            # internals are no host's concern); one imported by something else is decided, and must fail here
            assert patch["state"] == "not applicable", patch
            never_imported.add(patch["name"])
            continue
        absent = [row for row in reached if row["detail"].endswith("is not in this environment")]
        if absent and len(absent) == len(patch["targets"]):  # a part of verl this version lacks (0.6: trainer v1)
            assert patch["state"] == "not applicable" and patch["name"] in out["absent"], patch
            never_imported.add(patch["name"])
            continue
        assert reached, f"{patch['name']}: no target was imported"
        for row in reached:
            if mode == "apply" and row["state"] == "not applicable":
                continue  # its probe said no, so apply() was never reached
            assert row["state"] == "failed", patch
            assert f"RuntimeError: injected fault in {mode}" in row["detail"]
            failed.add(patch["name"])
    if mode == "applies":
        assert failed | never_imported == {p["name"] for p in out["patches"]}
        assert failed >= {p["name"] for p in out["patches"] if not p["name"].startswith("rehearse_")} - set(out["absent"])
    else:  # these apply on any host with the NPU doubles, so apply() must have been reached
        assert {"device", "ray_runtime_env", "ckpt_validation"} <= failed
    for name in failed:
        assert f"patch {name!r} failed" in proc.stderr


COUNT_APPLIES = """
import json, collections, dataclasses
from verl_ascend.core import activation, registry
activation.activate(source="test")  # load the records now (the .pth only armed the triggers)
calls = collections.Counter()
def counted(name, target, apply):
    def count(module):
        calls[f"{name}:{module.__name__ if module is not None else target}"] += 1  # None: a before-import step
        return apply(module)
    return count
for name in registry.names():
    patch = registry.get(name)
    if patch.apply is not None:  # a patch with steps may have none: its targets only gate the steps
        patch.apply = counted(name, None, patch.apply)
    patch.steps = tuple(dataclasses.replace(s, apply=counted(name, s.target, s.apply)) if s.apply else s
                        for s in patch.steps)
for _ in range(3):
    activation.activate(source="again")
    registry.install(activation.records())
from verl_ascend.core import status
status.collect(import_targets=True)
import verl, ray
# the wrappers themselves refuse to stack
from verl_ascend.core.marks import is_wrapped
depth = 0
f = ray.init
while f is not None:
    depth += is_wrapped(f, "ray_runtime_env")
    f = getattr(f, "__wrapped__", None)
print(json.dumps({"calls": calls, "ray_init_wrappers": depth,
                  "states": {p["name"]: p["state"] for p in registry.snapshot()}}))
"""


def test_activating_three_times_applies_each_patch_once():
    out = last_json(run_python(COUNT_APPLIES, env=clean_env(fake_npu=True)))
    applied = [name for name, state in out["states"].items() if state == "applied"]
    assert "device" in applied and "ray_runtime_env" in applied
    for name in applied:  # once per (patch, target module or step), however often activation ran
        per_target = {key: n for key, n in out["calls"].items() if key.startswith(name + ":")}
        assert per_target and set(per_target.values()) == {1}, out
    assert out["ray_init_wrappers"] == 1
