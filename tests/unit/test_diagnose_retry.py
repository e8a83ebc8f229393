"""What `diagnose` tells a tool that decides whether to restart a run (#46 items 3, 4, 6): per finding its family,
retry class and reason, the component that raised it, and every code with its official meaning and page; and the
public call for that tool, ``verl_ascend.diagnose.classify``."""

import json
from pathlib import Path

import pytest
from test_diagnose import cli_run, diagnose

from verl_ascend.diagnose import classify, codes, component, table
from verl_ascend.diagnose.families import retry

pytestmark = pytest.mark.verl_agnostic
FIX = Path(__file__).parents[1] / "fixtures" / "diagnose"
VERBATIM = FIX / "public" / "verbatim"


def test_every_family_has_a_retry_class_with_a_reason():
    assert set(retry.RETRY) == set(table.FAMILIES), set(table.FAMILIES) ^ set(retry.RETRY)
    for family in table.FAMILIES.values():
        assert family.retry_class in retry.CLASSES and family.retry_reason, family.id


def test_every_code_in_the_table_cites_its_public_page():
    for code in list(codes.MESSAGE) + ["EZ9999", "EE9999"] + [str(n) for n in codes.NUMERIC] + ["HCCL 9"]:
        e = codes.explain(code)
        assert e.get("meaning") and e.get("source", "").startswith("https://"), e
    for n in codes.NUMERIC:  # every numeric code also gets its range's handling from the aclError page
        assert codes.explain(str(n)).get("handling"), n


def test_codes_are_found_in_the_forms_logs_print_them():
    assert codes.find("RuntimeError: ACL stream synchronize failed, error code:507035") == ["507035"]
    assert codes.find("EI0006: Getting socket times out. Reason: ...") == ["EI0006"]
    assert "507015" in codes.find("rtStreamSynchronize failed, ret=507015")
    assert codes.find("HCCL function error: hcclCommInitRootInfo(...), error code is 9") == ["HCCL 9"]
    assert codes.explain("507035")["meaning"] == "vector core exception"
    assert "technical support" in codes.explain("507899")["handling"]


def test_json_carries_family_retry_class_component_and_explained_codes(capsys):
    code, out, err = cli_run(capsys, "diagnose", "--json", str(VERBATIM / "acl_stream_sync_507035.log"))
    result = json.loads(out)
    assert code == 1
    f = result["findings"][0]
    d = f["details"]
    assert d["family"] == f["code"] == "npu_runtime" and d["retry_class"] == "unknown" and d["retry_reason"]
    explained = {c["code"]: c for c in d["codes"]}
    assert explained["507035"]["meaning"] == "vector core exception"
    assert explained["507035"]["source"] == codes.RT_HEADER
    assert d["component"]["name"] and d["component"]["tracker"].startswith("https://")
    assert result["first_failure"]["retry_class"] == "unknown"
    code, out, err = cli_run(capsys, "diagnose", str(VERBATIM / "acl_stream_sync_507035.log"))
    assert "    retry:  unknown" in out and "    code:   507035 ACL_ERROR_RT_VECTOR_CORE_EXCEPTION: vector core exception" in out
    assert "    whose:  " in out


def test_a_code_is_explained_even_when_no_family_matches(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("[ERROR] RUNTIME(3030,python):2026-01-01-00:00:01.000.001 [stream.cc:10] rtStreamSynchronize "
                   "failed, ret=507053\n")
    f = diagnose(log)["findings"][0]
    assert f["code"] == table.UNRECOGNISED
    assert f["details"]["codes"] == [codes.explain("507053")] and f["details"]["codes"][0]["meaning"] == "device MEM ERROR"
    assert f["details"]["component"]["name"] == "CANN"


def test_the_component_is_the_deepest_frame_s_package(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("Traceback (most recent call last):\n"
                   '  File "/usr/local/lib/python3.11/site-packages/verl/trainer/main_ppo.py", line 42, in run\n'
                   "    trainer.fit()\n"
                   '  File "/usr/local/lib/python3.11/site-packages/vllm_ascend/worker/model_runner.py", line 9, in x\n'
                   "    raise ValueError(f'bad {n}')\n"
                   "ValueError: bad 3\n"
                   "INFO 01-02 03:04:05 [api_server.py:1] Initializing a V1 LLM engine (v0.9.1) with config\n")
    c = diagnose(log)["findings"][0]["details"]["component"]
    assert c["name"] == "vllm-ascend" and c["why"].startswith("deepest frame") and c["search"] == "ValueError: bad"
    assert c["tracker"] == "https://github.com/vllm-project/vllm-ascend/issues" and "q=" in c["search_url"]
    assert component.of("ValueError: x", "/opt/torch_npu/npu/utils.py:1 in f")[0] == "torch_npu"
    assert component.versions_in("Initializing a V1 LLM engine (v0.9.1) with config") == [("vllm", "0.9.1")]


def test_the_vllm_version_printed_at_start_up_is_named(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("INFO 01-02 03:04:05 [llm_engine.py:1] Initializing a V1 LLM engine (v0.9.1) with config: x\n"
                   "ERROR 01-02 03:04:09 [core.py:1] EngineCore failed to start.\n")
    c = diagnose(log)["findings"][0]["details"]["component"]
    assert c["name"] == "vllm" and c["version"] == "0.9.1"


def test_classify_is_the_call_supervise_makes(tmp_path):
    verdict = classify(VERBATIM / "nccl_watchdog_reduce_scatter.log")
    assert verdict.failed and verdict.family == "collective_timeout" and verdict.retry_class == "transient"
    assert verdict.reason and verdict.first_failure["rank"] == 0 and verdict.diagnosis.exit_code == 1
    verdict = classify(text=["(TaskRunner pid=1) step:1 - a:1", "ValueError: Unknown rollout name sgl"])
    assert verdict.failed and verdict.family == table.UNRECOGNISED and verdict.retry_class == "unknown"
    healthy = classify(FIX / "noise.log")
    assert not healthy.failed and healthy.retry_class is None


@pytest.mark.parametrize("line", [
    "AssertionError: Torch not compiled with CUDA enabled",
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx",
    "RuntimeError: Distributed package doesn't have NCCL built in",
])
def test_a_cuda_path_on_the_ascend_host_is_its_own_family_and_the_headline(tmp_path, line):
    log = tmp_path / "run.log"
    log.write_text('  File "/usr/local/lib/python3.10/site-packages/verl/utils/device.py", line 30, in get_torch_device\n'
                   "    return torch.cuda\n" + line + "\n"
                   "2026-01-01 00:00:09,000 ERROR worker.py:1 -- RuntimeError: HCCL watchdog\n")
    result = diagnose(log)
    assert result["first_failure"]["family"] == "cuda_on_ascend", result["first_failure"]
    assert result["first_failure"]["retry_class"] == "environment"
