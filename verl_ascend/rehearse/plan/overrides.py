"""Turn a recipe's main_ppo call into the rehearsal's: only what a CPU cannot do changes.

Every override of the recipe is kept unless it names something the rehearsal must replace
(model, rollout engine, sizes, devices, data files, schedule, output, and the learning rate, which
a tiny random model needs larger to show a learning signal in 2-3 steps); each replaced or dropped
one is listed with the reason. Algorithm, advantage estimator, KL settings, reward, data columns,
the trainer path (``trainer.use_v1``) and the engine stay the recipe's: a Megatron recipe runs
verl's Megatron engine with its parallel kinds scaled to the CPU ranks (:mod:`.layout`),
an FSDP recipe runs FSDP2. The engine is the one verl composes (:func:`engine_of`).
"""

import dataclasses
import re

MEGATRON_CONFIG = "ppo_megatron_trainer"

# Keys the rehearsal sets itself (a recipe value for them is replaced); regexes on the bare key.
COMMON = (
    (r"actor_rollout_ref\.model\.path", "model -> tiny random model of the same family"),
    (r"critic\.model\.(path|tokenizer_path)", "critic model -> the same tiny model (verl adds its value head)"),
    (r"critic\.model\.(use_remove_padding|enable_gradient_checkpointing)", "CPU run: off"),
    (r"critic\.model\.override_config\.attn_implementation", "attention -> sdpa (no flash-attn on CPU)"),
    (r"actor_rollout_ref\.model\.(use_remove_padding|enable_gradient_checkpointing)", "CPU run: off"),
    (r"actor_rollout_ref\.model\.override_config\.attn_implementation", "attention -> sdpa (no flash-attn on CPU)"),
    (r".*\.use_torch_compile", "CPU run: torch.compile off"),
    (r"actor_rollout_ref\.rollout\.(name|mode|tensor_model_parallel_size|data_parallel_size|"
     r"pipeline_model_parallel_size|expert_parallel_size|gpu_memory_utilization|max_num_batched_tokens|"
     r"max_num_seqs|max_model_len|enforce_eager|free_cache_engine|load_format|n|agent\.num_workers)",
     "rollout -> hf (transformers generate on CPU)"),
    (r"data\.(train_files|val_files)", "data -> truncated copy"),
    (r"data\.(train_batch_size|gen_batch_size|val_batch_size|max_prompt_length|max_response_length|truncation)",
     "sizes shrink"),
    (r".*(ppo_mini_batch_size|micro_batch_size|micro_batch_size_per_gpu|max_token_len_per_gpu)", "sizes shrink"),
    (r".*\.(param_offload|optimizer_offload|grad_offload)", "CPU run: nothing to offload"),
    (r"trainer\.(device|nnodes|n_gpus_per_node)", "devices -> CPU ranks"),
    (r"trainer\.(total_epochs|total_training_steps|save_freq|test_freq|val_before_train|resume_mode|"
     r"resume_from_path|default_local_dir|logger|max_actor_ckpt_to_keep|log_val_generations)",
     "schedule/output -> rehearsal's"),
    (r"ray_kwargs\..*", "Ray -> the rehearsal's own local cluster"),
    (r"reward\.num_workers|transfer_queue\.backend\.SimpleStorage\.num_data_storage_units", "sizes shrink"),
    (r"actor_rollout_ref\.actor\.optim\.lr", "learning rate -> the rehearsal's"),
    (r"reward\.custom_reward_function\.(path|name)", "reward -> the recipe's, plus the rehearsal's varying term"),
    (r"(reward\.reward_kwargs\.max_resp_len|reward\.reward_kwargs\.overlong_buffer_cfg\.len|"
     r"reward_model\.overlong_buffer\.len)", "overlong shaping scaled to the rehearsal's response length"),
)
# Settings that exist only on an NPU, keyed by (key regex, value regex): each is switched off here and listed.
# verl's NPU profiler (global_profiler.tool=npu; a role's profiler.tool=npu) builds verl/utils/profiler/mstx_profile.py,
# which imports torch_npu at module level: every worker that builds a profiler died of it (verl 0.9.0's Ascend
# example for Qwen3-30B-A3B sets it). With the tool off verl builds its no-op profiler; the recipe's profiler.enable
# and tool_config.npu.* lines have nothing left to act on and are listed with it.
NPU_PROFILER = "NPU profiler off (verl's npu profiler imports torch_npu; no CPU build)"
NPU_ONLY = (
    (r"global_profiler\.tool|.*\.profiler\.tool", r"['\"]?npu['\"]?", NPU_PROFILER),
)
# once the NPU profiler is off, the recipe's other profiler lines go with it (only then)
NPU_PROFILER_REST = r"global_profiler\..*|.*\.profiler\..*"
# DAPO's overlong reward shaping, scaled to the rehearsal's responses: (key, share of the response length)
OVERLONG = {"reward.reward_kwargs.max_resp_len": 1.0, "reward.reward_kwargs.overlong_buffer_cfg.len": 0.25,
            "reward_model.overlong_buffer.len": 0.25}
FSDP_ONLY = (
    (r".*\.megatron\..*", "engine -> FSDP2: Megatron settings dropped"),
    (r"actor_rollout_ref\.(actor|ref|critic)\.strategy|critic\.strategy", "engine -> FSDP2"),
)
MEGATRON_ONLY = (
    (r".*\.megatron\.(tensor_model_parallel_size|pipeline_model_parallel_size|virtual_pipeline_model_parallel_size|"
     r"expert_model_parallel_size|expert_tensor_parallel_size|context_parallel_size)",
     "parallel sizes -> scaled to the CPU ranks"),
    (r".*\.megatron\.dist_checkpointing_path", "initial weights -> the tiny model, converted by verl-ascend convert"),
    (r".*\.megatron\.use_remove_padding", "CPU run: padded batches (megatron's local attention has no packed path)"),
)
# A tiny random model trained for 2-3 steps: at a real model's rate (1e-6 and the like) the weights
# move by ~1e-6 of their size and actor/kl_loss prints 0.0, so the loop's learning signal could not
# be told from a broken update. Adam moves each weight by about the rate per step: 1e-3 is ~5% of
# the tiny model's init scale (0.02), enough for kl_loss to move, small enough to stay stable.
REHEARSAL_LR = "1e-3"
ROLES = ("actor", "ref")
# Kernel choices mbridge's MoE bridges (Qwen2/Qwen3-MoE) switch on that have no CPU build: the torch norm
# asserts against persist_layer_norm; GroupedMLP needs the grouped_gemm CUDA package (SequentialMLP holds the
# same checkpoint layout, as our converter writes it); the bias fusions are CUDA-jitted. Same math without them.
MOE_KERNELS = ("persist_layer_norm", "moe_grouped_gemm", "bias_activation_fusion", "bias_dropout_fusion")


# The engines a rehearsal runs as themselves (verl 0.9.1 also composes veomni and torchtitan: model_engine/*.yaml);
# any other is refused by name, never planned as one of these
REHEARSED_ENGINES = ("megatron", "fsdp", "fsdp2")


def engine_of(cfg) -> str:
    """The actor's engine in the config verl composes from the recipe (``actor.strategy``, which the
    ``model_engine`` defaults group and the config name set): "megatron", "fsdp", "fsdp2", ..."""
    from omegaconf import OmegaConf

    return str(OmegaConf.select(cfg, "actor_rollout_ref.actor.strategy", default="") or "")


@dataclasses.dataclass
class Plan:
    config_name: str
    overrides: list          # the rehearsal's main_ppo overrides, in order
    changes: list            # human-readable lines: what changed and why
    kept: list               # the recipe overrides kept as they are


def split(override: str) -> tuple:
    """``'+a.b=c'`` -> ``('+', 'a.b', 'c')``."""
    match = re.match(r"^(\+\+|\+|~)?([^=]+?)(=(.*))?$", override, re.S)
    if not match:
        return "", override, None
    return match.group(1) or "", match.group(2).strip(), match.group(4)


def _reason(key: str, rules):
    for pattern, reason in rules:
        if re.fullmatch(pattern, key):
            return reason
    return None


def value_of(overrides, key: str, default=None):
    """The last value the overrides give ``key`` (Hydra's last-wins), else ``default``."""
    found = default
    for item in overrides:
        _, k, v = split(item)
        if k == key and v is not None:
            found = v
    return found


def is_true(overrides, key: str) -> bool:
    """Whether the overrides leave ``key`` true (Hydra's last-wins; unset is false)."""
    return str(value_of(overrides, key, "False")).strip().lower() == "true"


@dataclasses.dataclass
class Megatron:
    """How the rehearsal runs a Megatron recipe (None in :func:`build` for an FSDP recipe)."""

    layout: object               # rehearse.layout.Layout: parallel sizes and layer counts for the CPU ranks
    dist_ckpt: str = ""          # the converted tiny model, when the recipe loads a dist checkpoint
    weights_given: bool = False  # --override names every loading role's dist_checkpointing_path: not converted
    bridge: str = ""             # the bridge the recipe's config chose, as the workers import it (never swapped)
    ref_own_transformer_config: bool = False  # the recipe sets ref.megatron.override_transformer_config.* itself
    mindspeed: str = ""          # MindSpeed's version when importable here: verl's MindspeedEngine, as on A2


def _megatron_overrides(m: Megatron, micro: int) -> tuple:
    engine = "verl's Megatron engine"
    if m.mindspeed:
        engine = (f"verl's MindSpeed engine (MindspeedEngineWithLMHead, as on an A2 node: MindSpeed {m.mindspeed} is "
                  "importable here; its adaptor imported before megatron, repatch with the recipe's options)")
    ours, changes = list(m.layout.overrides), [f"engine: {engine} over gloo, {m.layout.note}"] + m.layout.changes
    for role in ROLES:
        base = f"actor_rollout_ref.{role}.megatron"
        # verl's reference inherits the actor's override_transformer_config (an oc.select interpolation):
        # a key set on the ref would replace that whole dict, so the ref gets it only where the recipe set its own
        if role == "actor" or m.ref_own_transformer_config:
            ours += [f"++{base}.override_transformer_config.masked_softmax_fusion=False"]
            if m.layout.moe:
                ours += [f"++{base}.override_transformer_config.{key}=False" for key in MOE_KERNELS]
        if m.dist_ckpt:
            ours += [f"{base}.dist_checkpointing_path={m.dist_ckpt}"]
    ours += ["actor_rollout_ref.actor.megatron.use_remove_padding=False"]
    if m.layout.moe:
        changes.append(f"megatron MoE: {', '.join(k + '=False' for k in MOE_KERNELS)} (mbridge turns them on; no CPU "
                       "kernels: the torch norm, SequentialMLP experts, unfused bias ops; same weights and math)")
    changes.append("megatron: padded (bshd) batches, torch softmax (masked_softmax_fusion=False: the fused kernel is "
                   "CUDA-only), megatron's local layer spec instead of Transformer Engine; CUDA-only calls adapted by "
                   "the rehearse_mcore_* records (verl-ascend status lists them)")
    if m.dist_ckpt:
        changes.append(f"initial weights: the tiny model converted by verl-ascend convert into {m.dist_ckpt} "
                       "(use_dist_checkpointing kept, as the recipe loads its weights)")
    elif m.weights_given:
        changes.append("initial weights: the dist checkpoint that --override names (nothing converted here)")
    if m.bridge:
        changes.append(f"bridge: the recipe's, {m.bridge}")
    return ours, changes


def _npu_only(key: str, value, npu_profiler: bool):
    """Why a recipe's NPU-only setting is switched off here (None when ``key=value`` is not one)."""
    for key_re, value_re, reason in NPU_ONLY:
        if re.fullmatch(key_re, key) and re.fullmatch(value_re, str(value)):
            return reason
    if npu_profiler and re.fullmatch(NPU_PROFILER_REST, key):
        return NPU_PROFILER
    return None


def build(config_name: str, recipe_overrides: list, *, model_dir: str, train_file: str, val_file: str, nproc: int,
          steps: int, prompt_length: int, response_length: int, ckpt_dir: str, ray_tmp: str, n_resp: int,
          batch: int, reward_file: str = "", megatron: Megatron = None, critic: bool = False, nnodes: int = 1,
          recipe_world: tuple = (1, 8), lr: str = REHEARSAL_LR) -> Plan:
    """The rehearsal's overrides on top of the recipe's. ``nproc`` is ranks per node; with ``nnodes`` > 1 main_ppo
    joins the rehearsal's own Ray cluster (:mod:`.cluster`, which gives each node its resources), so ray_init gets
    no sizes of its own (ray.init refuses them when it connects to a cluster). ``lr`` is the actor's learning rate
    (``rehearse --lr``; the recipe's is replaced either way)."""
    changes, kept, dropped = [], [], {}
    name = config_name or "ppo_trainer"
    rules = COMMON + (MEGATRON_ONLY if megatron else FSDP_ONLY)
    replaced = megatron.layout.replaced if megatron else {}
    if not megatron and name == MEGATRON_CONFIG:
        name = "ppo_trainer"
        changes.append(f"config {config_name} -> {name} (engine Megatron -> FSDP2)")
    npu_profiler = any(re.fullmatch(k, split(item)[1]) and re.fullmatch(v, str(split(item)[2]))
                       for item in recipe_overrides for k, v, _ in NPU_ONLY)
    for item in recipe_overrides:
        prefix, key, value = split(item)
        reason = replaced.get(key) or _npu_only(key, value, npu_profiler) or _reason(key, rules)
        if reason is None:
            kept.append(item)
            continue
        dropped.setdefault(reason, []).append(f"{key}={value}" if value is not None else f"{prefix}{key}")
    for reason, items in dropped.items():
        shown = ", ".join(items[:6]) + (f" (+{len(items) - 6} more)" if len(items) > 6 else "")
        changes.append(f"{reason}: recipe's {shown}")
    micro = 2
    ours = [
        f"actor_rollout_ref.model.path={model_dir}",
        "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.model.use_remove_padding=False",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        "actor_rollout_ref.actor.use_torch_compile=False", "actor_rollout_ref.ref.use_torch_compile=False",
        f"actor_rollout_ref.actor.optim.lr={lr}",
        "actor_rollout_ref.rollout.name=hf", f"actor_rollout_ref.rollout.tensor_model_parallel_size={nproc}",
        f"actor_rollout_ref.rollout.n={n_resp}", "actor_rollout_ref.rollout.agent.num_workers=1",
        f"data.train_files={train_file}", f"data.val_files={val_file}",
        f"data.train_batch_size={batch}", f"data.max_prompt_length={prompt_length}",
        f"data.max_response_length={response_length}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        "reward.num_workers=1",
        # verl 0.9's TransferQueue defaults to 8 storage actors (sized for a cluster); one holds a tiny batch
        "++transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "trainer.device=cpu", f"trainer.nnodes={nnodes}", f"trainer.n_gpus_per_node={nproc}",
        f"trainer.total_training_steps={steps}", "trainer.save_freq=1", "trainer.test_freq=-1",
        "trainer.val_before_train=False", "trainer.resume_mode=auto", f"trainer.default_local_dir={ckpt_dir}",
        "trainer.logger=[console]",
    ]
    if nnodes == 1:
        ours += [
            # Ray's resource check and placement want GPU bundles; logical ones, and enough logical CPUs
            # for verl's {"CPU": 3, "GPU": 1} bundles (too few hangs instead of failing).
            "ray_kwargs.ray_init.num_cpus=16", f"++ray_kwargs.ray_init.num_gpus={nproc}",
            f"++ray_kwargs.ray_init._temp_dir={ray_tmp}",
            "++ray_kwargs.ray_init.include_dashboard=False",  # ~12 processes nobody looks at here
        ]
    for key, share in OVERLONG.items():
        if value_of(recipe_overrides, key) is not None:  # not in verl's config: added by the recipe, hence ++
            ours.append(f"++{key}={max(1, int(response_length * share))}")
    if value_of(recipe_overrides, "data.gen_batch_size") is not None:
        ours.append(f"data.gen_batch_size={batch}")
    if reward_file:
        ours += [f"reward.custom_reward_function.path={reward_file}", "reward.custom_reward_function.name=compute_score"]
    if critic:  # FSDP only (the rehearsal refuses a Megatron critic): the actor's model, sizes and engine
        ours += [f"critic.model.path={model_dir}", f"critic.model.tokenizer_path={model_dir}",
                 "++critic.model.override_config.attn_implementation=sdpa", "critic.model.use_remove_padding=False",
                 "critic.model.enable_gradient_checkpointing=False", f"critic.ppo_mini_batch_size={batch}",
                 f"critic.ppo_micro_batch_size_per_gpu={micro}", "critic.strategy=fsdp2"]
        changes.append(f"critic: the tiny model with verl's value head, FSDP2 over gloo, micro batch {micro}")
    if megatron:
        extra, notes = _megatron_overrides(megatron, micro)
        ours += extra
        changes += notes
    else:
        ours += ["actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.ref.strategy=fsdp2"]
        changes.append(f"engine: FSDP2 over gloo, {nproc * nnodes} CPU rank(s)")
    changes += [
        f"model: tiny random model at {model_dir}",
        f"rollout: hf (transformers generate), one server per {nproc} rank(s) (TP {nproc}), {n_resp} responses per "
        "prompt, 1 agent-loop "
        "worker, 1 TransferQueue storage unit",
        f"learning rate -> {lr}: a tiny random model for a few steps; at the recipe's rate the update is too "
        "small to move actor/kl_loss" if lr == REHEARSAL_LR else f"learning rate -> {lr} (--lr; the rehearsal's "
        f"default is {REHEARSAL_LR})",
        f"sizes: batch {batch} prompts, prompt <= {prompt_length} tokens, response <= {response_length} tokens, "
        f"micro batch {micro}, one mini-batch per step",
        f"schedule: {steps} step(s), checkpoint every step, no validation, console logger, then resume for 1 step; "
        "Ray without its dashboard",
    ]
    if nnodes > 1:
        r_nodes, r_per_node = recipe_world
        changes.append(f"nodes: the recipe's world {r_nodes * r_per_node} (trainer.nnodes={r_nodes} x n_gpus_per_node="
                       f"{r_per_node}, as `verl-ascend check` counts it) -> {nnodes} x {nproc} = {nnodes * nproc}")
        changes.append(f"nodes: {nnodes} Ray nodes on this machine x {nproc} CPU rank(s) (trainer.nnodes={nnodes}, "
                       f"n_gpus_per_node={nproc}), each with its own address, its own disk for the checkpoint folder "
                       "and Ray's, and no VERL_ASCEND* setting of its own (docs/rehearse.md, multi-node)")
    return Plan(name, kept + ours, changes, kept)
