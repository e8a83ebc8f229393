"""Library versions a verl job on Ascend depends on (group versions): verl and its support verdict,
tensordict, vllm-ascend vs vllm, MindSpeed, and whether verl's default trainer loop can start here
(verl 0.9: the v1 TransferQueue loop). The known-good sets of vllm-ascend are in :mod:`.known_good`."""

from verl_ascend.core import verl_install

from .findings import error, ok, skip, warn
from .torch import release

# dist names doctor reads the installed versions of (core.platform.installed_versions)
DISTS = ("verl", "tensordict", "vllm", "vllm-ascend", "mindspeed", "megatron-core", "torch", "torch-npu", "transformers")


def check_verl(versions, verl_verdict=None) -> list:
    """versions: dist name -> installed version or ''; verl_verdict: verl_ascend.core.support's verdict
    on the installed verl (what `import verl` warns and `status` shows), None when verl did not import
    (the patches group reports why)."""
    from verl_ascend.core.support import SUPPORTED

    verl = versions.get("verl", "")
    if not verl:
        return [error(check_verl, "verl is not installed in this environment",
                      f"install verl ({SUPPORTED}) into the Python that runs the trainer")]
    if verl_verdict and not verl_verdict["supported"]:
        return [warn(check_verl, f"verl {verl} is outside the range verl-ascend supports ({SUPPORTED}): "
                     f"{verl_verdict['reason']}", f"install a verl in {SUPPORTED}; `verl-ascend status` "
                     "shows which patches find their targets in this one")]
    return [ok(check_verl, f"verl {verl}" + (f" (supported: {SUPPORTED})" if verl_verdict else ""))]


def check_tensordict(versions, ascend_host) -> list:
    td = versions.get("tensordict", "")
    if not td:
        return [error(check_tensordict, "tensordict is not installed (verl needs it)", "pip install 'tensordict>=0.10'")]
    if (release(td) or (0, 0, 0)) < (0, 10, 0) and ascend_host:
        return [warn(check_tensordict, f"tensordict {td}: its .to('cpu') does not synchronize NPU copies; "
                     "a 128-NPU run saw the reward drop after step 50 (docs/field-reports.md)", "pip install tensordict==0.10.0")]
    return [ok(check_tensordict, f"tensordict {td}")]


def check_vllm_ascend(versions, ascend_host) -> list:
    vllm, va = versions.get("vllm", ""), versions.get("vllm-ascend", "")
    if not va:
        if ascend_host:
            return [warn(check_vllm_ascend, "vllm-ascend not installed: rollout.name=vllm cannot use NPUs",
                         "install the vllm-ascend release matching your vllm")]
        return [skip(check_vllm_ascend, "vllm-ascend not installed (not an Ascend node)")]
    wanted = ".".join(map(str, release(va) or ()))
    if not vllm:
        return [error(check_vllm_ascend, f"vllm-ascend {va} is installed but vllm is not", f"install vllm {wanted}")]
    if release(vllm) != release(va):
        return [warn(check_vllm_ascend, f"vllm-ascend {va} is released for vllm {wanted}, found vllm {vllm}",
                     "install the vllm release that vllm-ascend names, or the matching vllm-ascend")]
    return [ok(check_vllm_ascend, f"vllm-ascend {va} with vllm {vllm}")]


def check_mindspeed(versions, ascend_host) -> list:
    ms, mcore = versions.get("mindspeed", ""), versions.get("megatron-core", "")
    if ms:
        return [ok(check_mindspeed, f"MindSpeed {ms}" + (f", megatron-core {mcore}" if mcore else ""))]
    if ascend_host and mcore:
        return [warn(check_mindspeed, f"megatron-core {mcore} without MindSpeed: the megatron strategy "
                     "cannot run on NPU", "install MindSpeed (the branch matching your megatron-core)")]
    return [skip(check_mindspeed, "MindSpeed not installed" + ("" if ascend_host else " (not an Ascend node)"))]


def check_versions(versions, ascend_host, verl_verdict=None) -> list:
    """The four version checks above, in the table's order."""
    return (check_verl(versions, verl_verdict) + check_tensordict(versions, ascend_host)
            + check_vllm_ascend(versions, ascend_host) + check_mindspeed(versions, ascend_host))


def check_trainer_loop() -> list:
    if verl_install.package_dir() is None:
        return [skip(check_trainer_loop, "verl is not installed in this environment", "pip install verl")]
    default = verl_install.v1_default()
    if default is None:
        return [ok(check_trainer_loop, f"verl {verl_install.version()} has one PPO loop (the Ray PPO trainer)")]
    if not default:
        return [ok(check_trainer_loop, f"verl {verl_install.version()} defaults to the Ray PPO trainer (trainer.use_v1=False)")]
    missing = verl_install.v1_missing()
    if not missing:
        return [ok(check_trainer_loop, f"verl {verl_install.version()}'s default v1 TransferQueue loop has its packages")]
    return [error(check_trainer_loop, f"verl {verl_install.version()} runs the v1 TransferQueue loop by default "
                  f"(trainer.use_v1=True), which imports {', '.join(missing)}: not installed, main_ppo fails at start-up",
                  verl_install.v1_install_hint(missing) + " on every node, or pass trainer.use_v1=False")]


TE_NVIDIA_PARTS = "transformer_engine transformer_engine_cu12 transformer_engine_torch"


def check_megatron_path(megatron_path, ascend_host) -> list:
    """MindSpeed or MegatronAdaptor + TransformerEngine-NPU (core.megatron_path.facts), and the module-name
    clash of TE-NPU with NVIDIA's TransformerEngine."""
    found = megatron_path
    te, adaptor, ms = found["transformer_engine"], found["megatron_adaptor"], found["mindspeed"]
    if te and te["clash"]:
        return [error(check_megatron_path, f"two packages install the module transformer_engine: NVIDIA's "
                      f"{', '.join(te['nvidia'])} and {', '.join(te['other'])}; whichever was installed last "
                      "overwrote the other's files", f"on NPU keep TransformerEngine-NPU: pip uninstall {TE_NVIDIA_PARTS}, "
                      "then reinstall TransformerEngine-NPU; on GPU the reverse")]
    if te and te["nvidia"] and ascend_host:
        return [warn(check_megatron_path, f"NVIDIA's TransformerEngine ({', '.join(te['nvidia'])}) is installed on an "
                     "Ascend node: importing it loads cuDNN and fails (modelscope/ms-swift#6968), and MindSpeed / "
                     "MegatronAdaptor import transformer_engine when it is there",
                     f"pip uninstall {TE_NVIDIA_PARTS}; MegatronAdaptor needs TransformerEngine-NPU in its place")]
    if adaptor is not None:
        notes = [f"MegatronAdaptor installed ({adaptor or 'no distribution metadata'})"]
        if not te:
            return [warn(check_megatron_path, notes[0] + " without a transformer_engine module: it runs Megatron "
                         "through TransformerEngine-NPU", "install TransformerEngine-NPU (the branch matching "
                         "MegatronAdaptor's core_r branch) before `import megatron_adaptor`")]
        notes.append("transformer_engine from " + (", ".join(te["owners"]) or "a package without metadata"))
        if ms is not None:
            notes.append(f"MindSpeed {ms or ''} too: verl-ascend's mindspeed patch stands down in a process that "
                         "imported megatron_adaptor before Megatron, but verl's Megatron workers import MindSpeed's adaptor "
                         "themselves wherever MindSpeed is installed (0.8+: its MindspeedEngine; 0.6/0.7: "
                         "megatron_workers), after Megatron")
        else:
            notes.append("no verl release has an engine for it (verl-project/verl#7142 closed unmerged): verl's "
                         "Megatron workers on NPU run through MindSpeed")
        return [ok(check_megatron_path, "; ".join(notes))]
    if ms is not None:
        return [ok(check_megatron_path, "Megatron on NPU through MindSpeed (MegatronAdaptor not installed)")]
    return [skip(check_megatron_path, "neither MindSpeed nor MegatronAdaptor installed"
                 + ("" if ascend_host else " (not an Ascend node)"))]
