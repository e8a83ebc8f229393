"""`verl-ascend check`'s exit codes and JSON on the engine-key recipes, as a program (two subprocesses). What
the installed verl's workers read is found from its files here, independently of the code under test;
the verdicts themselves, in-process: tests/unit/test_check_worker_keys.py."""

import importlib.util
from pathlib import Path

from subproc import ROOT, clean_env, last_json, run_cli

WILD = ROOT / "tests" / "fixtures" / "wild_recipes"
GSPO = WILD / "gspo_fsdp_engine_sp4.sh"
MEGATRON = WILD / "megatron_mbridge.sh"
VERL = Path(list(importlib.util.find_spec("verl").submodule_search_locations)[0])
HAS_LEGACY_FSDP = (VERL / "workers" / "fsdp_workers.py").is_file()
_ENGINE_YAML = VERL / "trainer" / "config" / "engine" / "megatron.yaml"
HAS_VANILLA_KEY = _ENGINE_YAML.is_file() and "\nvanilla_mbridge:" in "\n" + _ENGINE_YAML.read_text()


def importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def test_cli_exit_codes_follow_the_workers_and_bridge_of_this_verl(tmp_path):
    env = clean_env(HOME=str(tmp_path))
    gspo = run_cli("check", str(GSPO), "--json", env=env, timeout=300)
    assert gspo.returncode == (0 if not HAS_LEGACY_FSDP else 2), gspo.stdout[-3000:] + gspo.stderr[-3000:]
    lengths = [f for f in last_json(gspo)["findings"] if f["severity"] == "error" and f["subject"] == "lengths"]
    assert len(lengths) == (3 if HAS_LEGACY_FSDP else 0)
    mega = run_cli("check", str(MEGATRON), env=env, timeout=300)
    missing = HAS_VANILLA_KEY and not importable("megatron.bridge")
    assert mega.returncode == (1 if missing else 0), mega.stdout[-3000:] + mega.stderr[-3000:]
    assert ("WARN  bridge:" in mega.stdout) == missing
