"""`verl-ascend check` (run_check, in this process) reads what the worker that runs reads: Ulysses SP from the engine config on verl's
engine workers (a GSPO/FSDP recipe shaped like verl's example, limits = (prompt + response) / SP),
the legacy key where the legacy FSDP worker runs; and which Megatron bridge the workers import.

What the installed verl has is found here independently of the code under test (its files, its yaml),
so each verl environment checks its own expectation. The CLI's exit codes on the same recipes:
tests/process/test_check_engine_keys.py."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
from subproc import ROOT

WILD = ROOT / "tests" / "fixtures" / "wild_recipes"
GSPO = WILD / "gspo_fsdp_engine_sp4.sh"
MEGATRON = WILD / "megatron_mbridge.sh"


def verl_file(*parts):
    spec = importlib.util.find_spec("verl")
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)


HAS_LEGACY_FSDP = verl_file("workers", "fsdp_workers.py").is_file()
MEGATRON_YAML = verl_file("trainer", "config", "engine", "megatron.yaml")
HAS_VANILLA_KEY = MEGATRON_YAML.is_file() and bool(re.search(r"^vanilla_mbridge:", MEGATRON_YAML.read_text(), re.M))


def importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("SP_SIZE", "PROMPT_LEN", "RESPONSE_LEN", "BRIDGE_SET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(script, sets=()):
    from verl_ascend.check import run_check

    return run_check(str(script), list(sets))


def of(report, rule, severity=None):
    return [f for f in report["findings"] if f["subject"] == rule and (severity is None or f["severity"] == severity)]


def test_gspo_fsdp_sp4_on_the_workers_this_verl_runs(home):
    report = check(GSPO)
    lengths = of(report, "lengths", "error")
    if not HAS_LEGACY_FSDP:  # verl 0.9: engine workers only; 10240 tokens fit 2560 x SP 4
        assert lengths == [], json.dumps(lengths, indent=1)
        assert report["layout"]["actor"]["cp"] == 4 and report["layout"]["actor"]["dp"] == 4
        assert not of(report, "parallel", "warning")
    else:  # the legacy FSDP worker runs by default and never reads fsdp_config's SP: the limits are short
        assert len(lengths) == 3, json.dumps(lengths, indent=1)
        (warn,) = [f for f in of(report, "parallel", "warning") if "legacy FSDP worker" in f["message"]]
        assert "actor_rollout_ref.actor.ulysses_sequence_parallel_size=4" in warn["fix"]
        # the engine workers, chosen explicitly, read it
        engine = check(GSPO, ["trainer.use_legacy_worker_impl=disable"])
        assert of(engine, "lengths", "error") == [] and engine["layout"]["actor"]["cp"] == 4


def test_engine_sp_still_catches_a_limit_too_small(home):
    """Halve the actor's limit: 1280 x SP 4 = 5120 < 10240 tokens, on whichever workers read SP 4."""
    sets = ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1280"]
    if HAS_LEGACY_FSDP:
        sets.append("trainer.use_legacy_worker_impl=disable")
    (err,) = of(check(GSPO, sets), "lengths", "error")
    assert "x sequence parallel 4 = 5120" in err["message"] and err["fix"].endswith(">= 2560")


def test_legacy_key_is_read_on_the_engine_workers_too(home):
    """verl copies <role>.ulysses_sequence_parallel_size > 1 into the engine config (old recipes)."""
    sets = ["actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=1",
            "actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size=1",
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size=4",
            "actor_rollout_ref.ref.ulysses_sequence_parallel_size=4"]
    report = check(GSPO, sets)
    assert of(report, "lengths", "error") == [] and report["layout"]["actor"]["cp"] == 4


def test_bridge_default_of_this_verl(home):
    report = check(MEGATRON)
    (hit,) = of(report, "bridge")
    if HAS_VANILLA_KEY:  # verl 0.9: vanilla_mbridge defaults to False = NVIDIA Megatron-Bridge
        assert "import megatron.bridge" in hit["message"]
        if not importable("megatron.bridge"):
            assert hit["severity"] == "warning" and "pip install megatron-bridge" in hit["fix"]
            assert "actor_rollout_ref.actor.megatron.vanilla_mbridge=True" in hit["fix"]
    else:  # no switch: mbridge is the only bridge
        assert "import mbridge" in hit["message"] and "no vanilla_mbridge switch" in hit["message"]
    expected = "info" if importable("megatron.bridge" if HAS_VANILLA_KEY else "mbridge") else "warning"
    assert hit["severity"] == expected


@pytest.mark.skipif(not HAS_VANILLA_KEY, reason="this verl has no vanilla_mbridge switch")
def test_bridge_chosen_explicitly(home, monkeypatch):
    monkeypatch.setenv("BRIDGE_SET", "True")
    (hit,) = of(check(MEGATRON), "bridge")
    assert "import mbridge" in hit["message"] and "vanilla_mbridge=True" in hit["message"]
    assert hit["severity"] == ("info" if importable("mbridge") else "warning")
