"""HF -> Megatron conversion (verl_ascend.convert): real megatron-core, mbridge, transformers on CPU.

Tiny random Qwen2 (tied embeddings), Qwen3 and Qwen3-MoE checkpoints are converted at world size
1 and 2 (torchrun, gloo) with TP2, PP2 and EP2, and every checkpoint is reloaded at the other
world size and compared tensor by tensor with the HF source (plus logits at world size 1).
Heavy work is batched: one process per world size and phase, because each megatron start costs
seconds on the shared 2-core CI machine.
"""

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from subproc import ROOT, clean_env, free_port, last_json, run_cli

DRIVER = ROOT / "tests" / "convert_driver.py"
SCRIPT = ROOT / "scripts" / "converter_hf_to_mcore.py"
ENV = dict(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")


def _driver(*args, nproc=1, timeout=900, cwd=None):
    cmd = [sys.executable, str(DRIVER), *map(str, args)]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
               "--master_port", str(free_port()), str(DRIVER), *map(str, args)]
    proc = subprocess.run(cmd, env=clean_env(**ENV), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return last_json(proc)


def _plan(tmp, entries, models=False):
    """entries: (name, argv list) to run, or (name, {"keys"/"plant": ...}) for the driver's helpers."""
    path = Path(tmp) / f"plan-{time.monotonic_ns()}.json"
    plan = [{"models": str(tmp)}] if models else []
    for name, what in entries:
        if isinstance(what, dict):
            plan.append({"name": name, **{k: v if isinstance(v, list) else str(v) for k, v in what.items()}})
        else:
            plan.append({"name": name, "argv": [str(a) for a in what]})
    path.write_text(json.dumps(plan))
    return path


def _by_name(results):
    return {r["name"]: r for r in results}


@pytest.fixture(scope="module")
def work():
    # Not tmp_path_factory: pytest prunes /tmp/pytest-of-<user>/ from other concurrent sessions.
    root = Path(tempfile.mkdtemp(prefix="va-convert-"))
    yield {"root": root, "hf": {name: str(root / "hf" / name) for name in ("qwen2", "qwen3", "qwen3_moe")}}
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def ws1(work):
    """World size 1: build the HF models, convert all three with --verify, exercise --overwrite."""
    root, hf = work["root"], work["hf"]
    out = {name: root / f"{name}-ws1" for name in hf}
    plan = [
        ("qwen2", ["--hf_model_path", hf["qwen2"], "--output_path", out["qwen2"], "--dtype", "fp32", "--verify"]),
        ("qwen3", ["--hf_model_path", hf["qwen3"], "--output_path", out["qwen3"], "--verify"]),  # bf16
        ("qwen3_moe", ["--hf_model_path", hf["qwen3_moe"], "--output_path", out["qwen3_moe"], "--dtype", "fp32",
                       "--verify"]),
        ("again", ["--hf_model_path", hf["qwen2"], "--output_path", out["qwen2"]]),
        ("overwrite", ["--hf_model_path", hf["qwen2"], "--output_path", out["qwen2"], "--dtype", "fp32",
                       "--overwrite"]),
        ("ctrl-c in verify", {"argv": ["--hf_model_path", hf["qwen2"], "--output_path", str(root / "qwen2-ctrl-c"),
                                       "--dtype", "fp32", "--verify"], "interrupt": "verify"}),
        ("dense keys", {"keys": out["qwen3"]}),
        ("moe keys", {"keys": out["qwen3_moe"]}),
        ("dense views", {"views": hf["qwen3"]}),
    ]
    results = _by_name(_driver("run", _plan(root, plan, models=True)))
    return out, results


@pytest.fixture(scope="module")
def ws2(work, ws1):
    """World size 2 (torchrun, gloo): TP2 / PP2 / EP2 conversions, and the world-size-1 outputs reloaded."""
    root, hf = work["root"], work["hf"]
    out1, _ = ws1
    out = {"qwen2": root / "qwen2-tp2", "qwen3": root / "qwen3-pp2", "qwen3_moe": root / "moe-ep2"}
    plan = [
        ("qwen2 tp2", ["--hf_model_path", hf["qwen2"], "--output_path", out["qwen2"], "--tp", 2, "--dtype", "fp32",
                       "--verify"]),
        ("qwen3 pp2", ["--hf_model_path", hf["qwen3"], "--output_path", out["qwen3"], "--pp", 2, "--verify"]),
        ("moe ep2", ["--hf_model_path", hf["qwen3_moe"], "--output_path", out["qwen3_moe"], "--ep", 2,
                     "--dtype", "fp32", "--verify"]),
        ("qwen2-ws1 at tp2", ["--hf_model_path", hf["qwen2"], "--output_path", out1["qwen2"], "--tp", 2,
                              "--verify_only"]),
        ("qwen3-ws1 at pp2", ["--hf_model_path", hf["qwen3"], "--output_path", out1["qwen3"], "--pp", 2,
                              "--verify_only"]),
        ("moe-ws1 at ep2", ["--hf_model_path", hf["qwen3_moe"], "--output_path", out1["qwen3_moe"], "--ep", 2,
                            "--verify_only"]),
    ]
    return out, _by_name(_driver("run", _plan(root, plan), nproc=2))


def _ok(result):
    assert result["rc"] == 0, result["stderr"]
    return result


def test_convert_world_size_1_verifies_tensors_and_logits(ws1):
    out, results = ws1
    for name in ("qwen2", "qwen3", "qwen3_moe"):
        _ok(results[name])
        meta = json.loads((out[name] / "metadata.json").read_text())
        assert meta, name
    # nothing left beside the outputs: the temporary directories were renamed into place
    assert not [p for p in out["qwen2"].parent.iterdir() if ".tmp-" in p.name]


def test_checkpoint_records_how_it_was_verified(ws1):
    out, _ = ws1
    info = json.loads((out["qwen3"] / "verl_ascend_convert.json").read_text())
    assert info["verification"]["status"] == "passed"
    assert info["verification"]["reloaded_as"]["world_size"] == 1
    # converted without --verify (the --overwrite run): the record says so
    info = json.loads((out["qwen2"] / "verl_ascend_convert.json").read_text())
    assert info["verification"]["status"] == "not run"
    assert oct((out["qwen3"] / "verl_ascend_convert.json").stat().st_mode & 0o777) != oct(0o600)


def test_ctrl_c_during_verify_says_the_checkpoint_is_complete_not_verified(ws1):
    out, results = ws1
    result = results["ctrl-c in verify"]
    ckpt = out["qwen2"].parent / "qwen2-ctrl-c"
    assert result["rc"] == 130
    assert "nothing was written" not in result["stderr"]
    assert f"checkpoint at {ckpt} is complete but not verified" in result["stderr"]
    assert (ckpt / "metadata.json").is_file()
    assert json.loads((ckpt / "verl_ascend_convert.json").read_text())["verification"]["status"] == "not run"


def test_checkpoint_keys_match_the_transformer_engine_layout(ws1):
    """verl (TE spec) must load what the local spec wrote: fused-norm names for dense layers,
    a separate pre_mlp_layernorm for MoE layers, and per-expert keys as TEGroupedMLP's."""
    _, results = ws1
    dense, moe = set(results["dense keys"]["keys"]), set(results["moe keys"]["keys"])
    assert "decoder.layers.self_attention.linear_qkv.layer_norm_weight" in dense
    assert "decoder.layers.mlp.linear_fc1.layer_norm_weight" in dense
    assert not any("input_layernorm" in k or "pre_mlp_layernorm" in k for k in dense)
    assert "decoder.layers.pre_mlp_layernorm.weight" in moe
    assert "decoder.layers.mlp.linear_fc1.layer_norm_weight" not in moe
    assert any(k.startswith("decoder.layers.mlp.experts.") for k in moe), sorted(moe)


def test_save_gets_no_views_so_megatron_does_not_clone_them_all_at_once(ws1):
    """Megatron's writer clones every view before writing; the SwiGLU fc1 halves are views. The
    writer hands it owned copies instead, freeing each split parameter, with every value kept."""
    _, results = ws1
    r = _ok(results["dense views"])
    fc1 = [k for k in r["stock_views"] if "linear_fc1.weight" in k]
    assert len(fc1) == 2 * 4, r["stock_views"]  # gate and up halves of 4 layers: the condition exists
    assert r["views_after"] == [] and r["differ"] == []
    assert r["emptied_params"] == 4  # one fc1 weight per layer
    # what the writer will clone is gone from the parameters: the views' bytes are held once
    assert r["param_bytes_before"] - r["param_bytes_after"] == r["view_bytes"]


def test_existing_output_is_refused_unless_overwrite(ws1):
    _, results = ws1
    assert results["again"]["rc"] == 2
    assert "not empty" in results["again"]["stderr"] and "--overwrite" in results["again"]["stderr"]
    _ok(results["overwrite"])


@pytest.mark.verl_agnostic
def test_world_size_2_tp_pp_ep_and_reload_at_other_world_size(ws2):
    _, results = ws2
    for result in results.values():
        _ok(result)


@pytest.fixture(scope="module")
def ws1_reload(work, ws1, ws2):
    """World size 1 again: the world-size-2 outputs reloaded, and a planted defect."""
    hf, root = work["hf"], work["root"]
    out, _ = ws2
    bad = root / "qwen3-bad"
    shutil.copytree(ws1[0]["qwen3"], bad)
    plan = [(f"{name} at ws1", ["--hf_model_path", hf[name], "--output_path", path, "--verify_only"])
            for name, path in out.items()]
    plan += [("plant", {"plant": [str(bad), "decoder.layers.1.self_attention.linear_proj.weight"]}),
             ("bad", ["--hf_model_path", hf["qwen3"], "--output_path", bad, "--verify_only"])]
    return _by_name(_driver("run", _plan(root, plan)))


@pytest.mark.verl_agnostic
def test_world_size_2_outputs_reload_at_world_size_1(ws1_reload):
    for name in ("qwen2", "qwen3", "qwen3_moe"):
        _ok(ws1_reload[f"{name} at ws1"])


@pytest.mark.verl_agnostic
def test_planted_defect_fails_verify_naming_the_tensor(ws1_reload):
    result = ws1_reload["bad"]
    assert result["rc"] == 1, result["stderr"]
    assert "verification FAILED" in result["stderr"]
    assert "model.layers.1.self_attn.o_proj.weight" in result["stderr"]
    assert "1 of 4096 values differ" in result["stderr"]
    assert "in 1 tensor(s)" in result["stderr"]  # only the altered tensor is named


@pytest.mark.verl_agnostic
def test_killed_conversion_leaves_nothing_at_output_path(work):
    tmp_path = work["root"]
    output = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--hf_model_path", work["hf"]["qwen3_moe"],
                             "--output_path", str(output)], env=clean_env(**ENV),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600  # generous: CI machines are shared
    try:
        while not list(tmp_path.glob(".killed.tmp-*")):
            assert proc.poll() is None, f"conversion ended before it could be killed: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "no temporary directory appeared"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not output.exists()


# ---- bad input: exit 2 with a message naming the value and the fix (no megatron needed) ----

def _tiny_checkpoint(folder: Path, **config):
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    base = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=128, intermediate_size=96, hidden_size=64)
    base.update(config)
    (folder / "config.json").write_text(json.dumps(base))
    save_file({"model.embed_tokens.weight": torch.zeros(128, 64)}, str(folder / "model.safetensors"))
    return folder


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("case, argv_extra, expected", [
    ("missing", [], "is not a directory"),
    ("no_config", [], "no config.json"),
    ("corrupt", [], "not a readable safetensors file"),
    ("llama", [], "unsupported architecture: model_type='llama'"),
    ("heads", ["--tp", "3"], "--tp 3 does not divide num_attention_heads=4"),
    ("ep_dense", ["--ep", "2"], "--ep 2 given for a dense model"),
    ("world", ["--tp", "2"], "world size 1 is not a multiple of TP*PP"),
    ("tied_pp", ["--pp", "2"], "--pp 2 with tie_word_embeddings=true cannot be converted on a CPU-only host"),
])
def test_bad_input_exits_2(tmp_path, capsys, monkeypatch, case, argv_extra, expected):
    from verl_ascend.cli import script

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    if case == "tied_pp":
        monkeypatch.setenv("WORLD_SIZE", "2")
    hf = tmp_path / "hf"
    if case != "missing":
        extra = {"llama": {"model_type": "llama"}, "tied_pp": {"tie_word_embeddings": True}}.get(case, {})
        _tiny_checkpoint(hf, **extra)
    if case == "no_config":
        (hf / "config.json").unlink()
    if case == "corrupt":
        data = (hf / "model.safetensors").read_bytes()
        (hf / "model.safetensors").write_bytes(data[: len(data) // 3])
    rc = script("convert", ["--hf_model_path", str(hf), "--output_path", str(tmp_path / "out"), *argv_extra])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert expected in err
    assert not (tmp_path / "out").exists()


@pytest.mark.verl_agnostic
def test_unwritable_output_folder_exits_2_before_any_work(tmp_path):
    hf = _tiny_checkpoint(tmp_path / "hf")
    locked = tmp_path / "locked"
    locked.mkdir()
    # read-only in a bubblewrap mount namespace: not writable even for root
    proc = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(locked), str(locked), sys.executable,
                           "-m", "verl_ascend", "convert", "--hf_model_path", str(hf), "--output_path",
                           str(locked / "out")], env=clean_env(**ENV), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not writable" in proc.stderr and str(locked) in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.verl_agnostic
def test_cli_subcommand_and_script_entry(tmp_path):
    proc = run_cli("convert", "--help", env=clean_env(), timeout=60)
    assert proc.returncode == 0 and "--hf_model_path" in proc.stdout and "--verify" in proc.stdout
    proc = subprocess.run([sys.executable, str(SCRIPT), "--hf_model_path", str(tmp_path / "nope"), "--output_path",
                           str(tmp_path / "out")], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "is not a directory" in proc.stderr


# ---- what the converter needs, asked first (every environment: megatron-core 0.16, 0.13.0, 0.12.3) ----

MBRIDGE_IMPORTS = """
import json
try:
    from mbridge import AutoBridge
    print(json.dumps(""))
except Exception as e:
    print(json.dumps(type(e).__name__ + ": " + str(e)))
"""


@pytest.mark.field_stack
def test_megatron_core_below_the_floor_is_refused_before_any_work(tmp_path):
    """Where mbridge cannot import with this megatron-core (0.12.x: Transformer Engine imported
    unguarded), exit 2 naming the floor and the fix, nothing written, no traceback. Where it can, the
    converter goes on to its next check (here: a non-empty --output_path, also exit 2)."""
    from importlib import metadata

    import torch
    from safetensors.torch import save_file

    from verl_ascend.convert.requirements import MCORE_FLOOR

    # the installed wheel's own metadata: megatron-core only in the `megatron` extra, at the converter's floor
    mcore_reqs = [r.replace(" ", "").replace("'", '"') for r in metadata.requires("verl-ascend") if r.startswith("megatron-core")]
    assert mcore_reqs == [f'megatron-core>={MCORE_FLOOR};extra=="megatron"'], mcore_reqs
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen2", "num_attention_heads": 4, "num_key_value_heads": 2,
                                                "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 128,
                                                "intermediate_size": 96}))
    save_file({"model.embed_tokens.weight": torch.zeros(128, 64)}, str(hf / "model.safetensors"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("the user's")
    problem = last_json(subprocess.run([sys.executable, "-c", MBRIDGE_IMPORTS], env=clean_env(), capture_output=True,
                                       text=True, timeout=300))
    proc = run_cli("convert", "--hf_model_path", str(hf), "--output_path", str(out), env=clean_env(**ENV), timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"] and not list(tmp_path.glob(".out.tmp-*"))
    if problem:
        mcore = metadata.version("megatron-core")
        assert f"megatron-core >= {MCORE_FLOOR}" in proc.stderr and f"megatron-core {mcore}" in proc.stderr, proc.stderr
        assert "verl-ascend[convert,megatron]" in proc.stderr and problem.split(":")[0] in proc.stderr
    else:
        assert "megatron-core >=" not in proc.stderr and str(out) in proc.stderr, proc.stderr
