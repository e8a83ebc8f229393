"""The plugin is active inside Ray workers, and the driver's switches reach workers on other nodes.

A `ray start` head started with its own environment plays the part of another node: its workers
inherit that environment, not the driver's, exactly as on a multi-node A2 cluster.
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from subproc import clean_env, free_port, kill_cluster, last_json, run_python

ACTOR_PROBE = """
import json, os, sys, ray
address = sys.argv[1] if len(sys.argv) > 1 else None
if address:
    ray.init(address=address, log_to_driver=False)
else:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)

@ray.remote(num_cpus=1)
class Probe:
    def report(self):
        import verl
        from verl.utils.device import get_device_name, get_nccl_backend
        from verl_ascend.core import activation, registry
        return {
            "info": activation.activation_info(),
            "device": get_device_name(),
            "backend": get_nccl_backend(),
            "device_patch": registry.summarize("device")["state"],
            "switch": os.environ.get("VERL_ASCEND_ROLLOUT_ORDER"),
        }

probe = Probe.remote()
print(json.dumps(ray.get(probe.report.remote(), timeout=180)))
ray.shutdown()
"""


def test_actor_in_local_ray_is_patched_and_agrees_on_device():
    out = last_json(run_python(ACTOR_PROBE, env=clean_env(fake_npu=True), timeout=300))
    assert out["info"]["active"] is True
    assert out["device_patch"] == "applied"
    assert (out["device"], out["backend"]) == ("npu", "hccl")


@pytest.fixture(scope="module")
def other_node():
    """A Ray head whose processes have the node's environment: fake torch_npu, no VERL_ASCEND_*."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="va-ray-")
    ray_bin = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", f"--temp-dir={temp_dir}"],
        env=clean_env(fake_npu=True, RAY_AUTH_MODE="disabled"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        ready = subprocess.run(
            [ray_bin, "status", f"--address={address}"],
            env=clean_env(RAY_AUTH_MODE="disabled"), capture_output=True, timeout=60,
        )
        if ready.returncode == 0:
            break
        time.sleep(2)
    else:
        kill_cluster(head, temp_dir)
        pytest.fail("ray head did not come up in 120 s")
    yield address
    kill_cluster(head, temp_dir)


# Runtime-env forwarding is Ray's mechanism (the same Ray in every test environment), not verl's: these
# two run in the first environment only. The worker's own activation and device answer per verl version
# is test_actor_in_local_ray_is_patched_and_agrees_on_device, which runs in every environment.
@pytest.mark.verl_agnostic
def test_driver_switches_reach_workers_on_another_node(other_node):
    driver_env = clean_env(fake_npu=True, VERL_ASCEND_ROLLOUT_ORDER="interleaved", RAY_AUTH_MODE="disabled")
    out = last_json(run_python(ACTOR_PROBE, env=driver_env, args=(other_node,), timeout=300))
    assert out["switch"] == "interleaved"
    assert out["info"]["active"] is True and out["device"] == "npu"


@pytest.mark.verl_agnostic
def test_without_forwarding_the_worker_keeps_its_node_environment(other_node):
    # The counter-test: with ray_runtime_env off the switch stays on the driver.
    driver_env = clean_env(
        fake_npu=True,
        VERL_ASCEND_ROLLOUT_ORDER="interleaved",
        VERL_ASCEND_PATCHES="-ray_runtime_env",
        RAY_AUTH_MODE="disabled",
    )
    out = last_json(run_python(ACTOR_PROBE, env=driver_env, args=(other_node,), timeout=300))
    assert out["switch"] is None
