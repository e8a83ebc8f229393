"""Device answer in a fresh interpreter, with the Ascend doubles, on the installed verl."""

from subproc import clean_env, last_json, run_python

PROBE = """
import json
{prelude}
import verl
from verl.utils.device import get_device_name, get_nccl_backend
print(json.dumps({{"device": get_device_name(), "backend": get_nccl_backend()}}))
"""


def probe(prelude="", **env_kwargs):
    return last_json(run_python(PROBE.format(prelude=prelude), env=clean_env(**env_kwargs)))


def test_fake_torch_npu_gives_npu_and_hccl():
    assert probe(fake_npu=True) == {"device": "npu", "backend": "hccl"}


def test_transfer_to_npu_imported_first_still_gives_npu():
    # MindSpeed's adaptor imports transfer_to_npu before verl: torch.cuda.is_available() is then True.
    prelude = "import torch, torch_npu.contrib.transfer_to_npu; assert torch.cuda.is_available()"
    assert probe(prelude, fake_npu=True) == {"device": "npu", "backend": "hccl"}


def test_stray_nvidia_smi_does_not_win():
    assert probe(fake_npu=True, bins=("nvidia-smi",)) == {"device": "npu", "backend": "hccl"}


def test_all_three_at_once():
    prelude = "import torch_npu.contrib.transfer_to_npu"
    assert probe(prelude, fake_npu=True, bins=("nvidia-smi", "npu-smi")) == {"device": "npu", "backend": "hccl"}


def test_without_doubles_the_answer_is_verls_own():
    stock = probe(VERL_ASCEND="0")
    assert probe() == stock
    assert stock["device"] in ("cpu", "cuda")  # 0.6.1 says cpu, 0.9.1 falls back to nvidia


def test_transfer_to_npu_without_plugin_reproduces_the_bug():
    # Shows the double is faithful: stock verl (< 0.9) picks cuda, 0.9 picks by its probe order.
    prelude = "import torch_npu.contrib.transfer_to_npu"
    stock = probe(prelude, fake_npu=True, bins=("nvidia-smi",), VERL_ASCEND="0")
    assert stock["device"] == "cuda"


def test_ascend_host_with_broken_torch_npu_and_autoload_off_raises_the_fix():
    # Only reachable with autoload off (torch_npu < 2.5 has no entry point): with it on, `import
    # torch` fails first (tests/process/test_real_torch_npu.py, tests/process/test_broken_torch_npu.py).
    code = """
import json, verl
from verl_ascend.core import registry
from verl.utils.device import get_device_name
try:
    get_device_name()
    print(json.dumps({"raised": None}))
except Exception as exc:
    print(json.dumps({"raised": type(exc).__name__, "msg": str(exc),
                      "state": registry.summarize("device")["state"]}))
"""
    env = clean_env(fake_npu=True, FAKE_TORCH_NPU_BROKEN="1", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = last_json(run_python(code, env=env))
    assert out["raised"] == "AscendRuntimeError"
    assert "set_env.sh" in out["msg"] and "libhccl.so" in out["msg"]
    assert out["state"] == "applied"


def test_forced_off_keeps_stock_answer():
    assert probe(fake_npu=True, VERL_ASCEND_DEVICE="cpu") == probe(fake_npu=True, VERL_ASCEND="0")


def test_npu_smi_alone_marks_host_but_needs_torch_npu():
    # npu-smi on PATH but no torch_npu: the host is Ascend, the runtime is missing -> clear error.
    code = """
import json, verl
from verl.utils.device import get_nccl_backend
try:
    print(json.dumps({"backend": get_nccl_backend()}))
except Exception as exc:
    print(json.dumps({"error": str(exc)}))
"""
    out = last_json(run_python(code, env=clean_env(bins=("npu-smi",))))
    assert "npu-smi on PATH" in out["error"] and "set_env.sh" in out["error"]
