"""Ascend A2 preflight rules over a composed verl config. Each returns findings naming keys,
numbers and a fix. Facts about the model may be None (then model-dependent rules are skipped).

:data:`ALL` is the table of rules (name, function, what it checks): a rule's findings carry its name as
their subject, every rule takes the one :class:`Context`, and docs/check.md's rule table is held to it
(tests/unit/test_check_rules.py)."""

import dataclasses
from typing import Optional

from verl_ascend.core import ifname
from verl_ascend.core.findings import ERROR, INFO, WARNING, finding
from verl_ascend.core.profiles import DEFAULT, PROFILES, Profile
from verl_ascend.recipe.layout import ARR, RUNTIME_ENV_VARS, get, get_int, rollout_layout, train_layout, world_size
from verl_ascend.recipe.model_facts import ModelFacts

from . import alloc, bridge, hbm, megatron_path, roce  # rules of their own modules (none imports this one)

NODE = ("trainer.nnodes", "trainer.n_gpus_per_node")


@dataclasses.dataclass
class Context:
    cfg: object  # None when the config did not compose: only the rules that need none run
    facts: Optional[ModelFacts]
    use_ref: bool
    has_auto_set_device: bool = True
    device_patch_active: bool = False
    verl_raises_batched_tokens: bool = False  # the installed verl's vLLM server fixes max_num_batched_tokens
    profile: Profile = PROFILES[DEFAULT]
    launch_env: dict = dataclasses.field(default_factory=dict)
    engine_workers: bool = False  # verl's engine workers run (trainer_path.engine_workers): SP from fsdp_config
    cann: str = ""  # the cluster's CANN version from check --cann ("" = not given)

    @property
    def world(self) -> int:
        return world_size(self.cfg)

    def exported(self, var: str) -> dict:
        """Where the job sets environment variable ``var``: {where: value} for the launch script's export and
        Ray's runtime env in the config (``RUNTIME_ENV_VARS``.var), the ones that set it only."""
        found = {var: self.launch_env.get(var), f"{RUNTIME_ENV_VARS}.{var}": get(self.cfg, f"{RUNTIME_ENV_VARS}.{var}")}
        return {where: value for where, value in found.items() if value is not None}

    def layouts(self):
        roles = ["actor"] + (["ref"] if self.use_ref else [])
        return [train_layout(self.cfg, role, self.engine_workers) for role in roles]

    def megatron_layouts(self):
        return [lay for lay in self.layouts() if lay.is_megatron]


def _divisors_near(total: int, target: int) -> list:
    return sorted((d for d in range(1, total + 1) if total % d == 0), key=lambda d: (abs(d - target), d))[:3]


def _nodes_for(cfg, ranks: int) -> int:
    """Smallest node count whose NPUs a group of `ranks` ranks divides."""
    per_node = get_int(cfg, "trainer.n_gpus_per_node", 8)
    return next(n for n in range(1, ranks + 1) if (n * per_node) % ranks == 0)


def parallel(ctx: Context) -> list:
    out, world = [], ctx.world
    moe = bool(ctx.facts and ctx.facts.is_moe)
    for lay in ctx.layouts():
        if not lay.is_megatron:
            engine_key = f"{ARR}.{lay.role}.fsdp_config.ulysses_sequence_parallel_size"
            engine_sp = get_int(ctx.cfg, engine_key, 1)
            if not ctx.engine_workers and engine_sp > 1 and lay.cp == 1:
                out.append(finding("parallel", WARNING, (engine_key, lay.sp_key),
                                   f"{lay.role}: {engine_key.rsplit('.', 2)[1]}.ulysses_sequence_parallel_size="
                                   f"{engine_sp} is read by verl's engine workers only; this verl runs the legacy "
                                   f"FSDP worker, which reads {lay.sp_key} (1): no sequence parallelism",
                                   f"set {lay.sp_key}={engine_sp}, or trainer.use_legacy_worker_impl=disable"))
            if world % lay.cp:
                out.append(finding("parallel", ERROR, NODE + (lay.sp_key,),
                                   f"{lay.role}: world size {world} is not divisible by Ulysses SP {lay.cp}",
                                   f"use a sequence parallel size among {_divisors_near(world, lay.cp)}"))
            continue
        keys = NODE + tuple(lay.key(k) for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                 "context_parallel_size"))
        if world % lay.model_parallel:
            out.append(finding("parallel", ERROR, keys,
                               f"{lay.role}: world size {world} (trainer.nnodes x n_gpus_per_node) is not divisible by "
                               f"TP {lay.tp} x PP {lay.pp} x CP {lay.cp} = {lay.model_parallel}",
                               f"set trainer.nnodes to a multiple of {_nodes_for(ctx.cfg, lay.model_parallel)}, or choose "
                               f"TP x PP x CP dividing {world}, e.g. "
                               f"{' or '.join(str(d) for d in _divisors_near(world, lay.model_parallel))}"))
            continue
        if moe or lay.ep > 1:
            per_stage = world // lay.pp
            if per_stage % (lay.etp * lay.ep):
                out.append(finding("parallel", ERROR, NODE + (lay.key("pipeline_model_parallel_size"),
                                                              lay.key("expert_model_parallel_size"),
                                                              lay.key("expert_tensor_parallel_size")),
                                   f"{lay.role}: {per_stage} ranks per pipeline stage ({world} / PP {lay.pp}) are not "
                                   f"divisible by expert TP {lay.etp} x EP {lay.ep} = {lay.etp * lay.ep}",
                                   f"choose EP so that ETP x EP divides {per_stage}"))
        if lay.tp > get_int(ctx.cfg, "trainer.n_gpus_per_node", 8):
            hccs = ctx.profile.superpod and str(ctx.launch_env.get("HCCL_INTER_HCCS_DISABLE", "")).upper() != "TRUE"
            if hccs:
                out.append(finding("parallel", INFO, (lay.key("tensor_model_parallel_size"), NODE[1]),
                                   f"{lay.role}: TP {lay.tp} spans servers ({NODE[1]}={get(ctx.cfg, NODE[1])}): inside "
                                   "an A3 SuperPoD that traffic goes over HCCS, across SuperPoDs over RoCE"))
            else:
                out.append(finding("parallel", WARNING, (lay.key("tensor_model_parallel_size"), NODE[1]),
                                   f"{lay.role}: TP {lay.tp} spans nodes ({NODE[1]}={get(ctx.cfg, NODE[1])}): tensor "
                                   "parallel traffic then crosses RoCE on every layer",
                                   "keep TP within a node; use PP or EP across nodes"))
    ro = rollout_layout(ctx.cfg)
    rkeys = NODE + (f"{ARR}.rollout.tensor_model_parallel_size", f"{ARR}.rollout.data_parallel_size",
                    f"{ARR}.rollout.pipeline_model_parallel_size")
    if world % ro.replica:
        out.append(finding("parallel", ERROR, rkeys,
                           f"rollout: world size {world} is not divisible by one rollout replica = TP {ro.tp} x DP "
                           f"{ro.dp} x PP {ro.pp} = {ro.replica}",
                           f"set trainer.nnodes to a multiple of {_nodes_for(ctx.cfg, ro.replica)}, or choose a "
                           f"replica size dividing {world}, e.g. "
                           f"{' or '.join(str(d) for d in _divisors_near(world, ro.replica))}"))
    if ro.ep > 1 and ro.ep != ro.tp * ro.dp:
        out.append(finding("parallel", ERROR, (f"{ARR}.rollout.expert_parallel_size",) + rkeys[2:4],
                           f"rollout: expert_parallel_size {ro.ep} must equal TP {ro.tp} x DP {ro.dp} = {ro.tp * ro.dp}",
                           f"set actor_rollout_ref.rollout.expert_parallel_size={ro.tp * ro.dp}"))
    return out


def batch(ctx: Context) -> list:
    out, cfg = [], ctx.cfg
    actor = train_layout(cfg, "actor", ctx.engine_workers)
    dp = actor.dp(ctx.world)
    n = get_int(cfg, f"{ARR}.rollout.n", 1)
    tbs = get_int(cfg, "data.train_batch_size", 0)
    mini = get_int(cfg, f"{ARR}.actor.ppo_mini_batch_size", 0)
    k_tbs, k_mini, k_n = "data.train_batch_size", f"{ARR}.actor.ppo_mini_batch_size", f"{ARR}.rollout.n"
    k_micro = f"{ARR}.actor.ppo_micro_batch_size_per_gpu"
    adv = str(get(cfg, "algorithm.adv_estimator", ""))
    if adv in ("grpo", "rloo", "grpo_passk", "opo", "gpg") and n < 2:
        out.append(finding("batch", ERROR, (k_n, "algorithm.adv_estimator"),
                           f"{adv} compares responses within a group, but rollout.n={n}: every advantage is 0",
                           "set actor_rollout_ref.rollout.n to 4 or more (8-16 is usual)"))
    if not dp or not tbs or not mini:
        return out
    if tbs < mini:
        out.append(finding("batch", ERROR, (k_tbs, k_mini),
                           f"ppo_mini_batch_size {mini} is larger than train_batch_size {tbs}",
                           f"set {k_mini} to a divisor of {tbs}"))
        return out
    if tbs % mini:
        out.append(finding("batch", WARNING, (k_tbs, k_mini),
                           f"train_batch_size {tbs} is not a multiple of ppo_mini_batch_size {mini}: the last "
                           "mini-batch of every step is smaller", f"set {k_mini} to a divisor of {tbs}"))
    if (tbs * n) % dp:
        out.append(finding("batch", ERROR, (k_tbs, k_n) + NODE,
                           f"train_batch_size {tbs} x n {n} = {tbs * n} sequences do not split evenly over the "
                           f"actor's {dp} data-parallel ranks", f"make train_batch_size x n a multiple of {dp}"))
    elif (mini * n) % dp:
        out.append(finding("batch", ERROR, (k_mini, k_n) + NODE,
                           f"ppo_mini_batch_size {mini} x n {n} = {mini * n} is not divisible by the actor's {dp} "
                           "data-parallel ranks (verl floors the per-rank mini-batch)",
                           f"make ppo_mini_batch_size x n a multiple of {dp}"))
    elif not get(cfg, f"{ARR}.actor.use_dynamic_bsz", False):
        per_rank = mini * n // dp
        micro = get_int(cfg, f"{ARR}.actor.ppo_micro_batch_size_per_gpu")
        if micro and per_rank % micro:
            out.append(finding("batch", ERROR, (k_micro, k_mini, k_n),
                               f"per-rank mini-batch {per_rank} (= {mini} x {n} / DP {dp}) is not divisible by "
                               f"ppo_micro_batch_size_per_gpu {micro}",
                               f"use a micro-batch among {[d for d in range(1, min(per_rank, 16) + 1) if per_rank % d == 0]}"))
        elif micro and actor.is_megatron and actor.pp > 1 and per_rank // micro < actor.pp:
            out.append(finding("batch", WARNING, (k_micro, actor.key("pipeline_model_parallel_size")),
                               f"{per_rank // micro} micro-batches per mini-batch for PP {actor.pp}: the pipeline "
                               "idles most of the time", f"use at least {actor.pp} micro-batches per mini-batch"))
    return out


def lengths(ctx: Context) -> list:
    out, cfg = [], ctx.cfg
    p, r = get_int(cfg, "data.max_prompt_length", 0), get_int(cfg, "data.max_response_length", 0)
    seq = p + r
    pr = ("data.max_prompt_length", "data.max_response_length")
    ro = f"{ARR}.rollout"
    max_model_len = get_int(cfg, f"{ro}.max_model_len")
    if max_model_len and max_model_len < seq:
        out.append(finding("lengths", ERROR, (f"{ro}.max_model_len",) + pr,
                           f"prompt {p} + response {r} = {seq} tokens exceed rollout.max_model_len {max_model_len}",
                           f"raise {ro}.max_model_len to >= {seq} or shorten the lengths"))
    batched = get_int(cfg, f"{ro}.max_num_batched_tokens")
    engine = str(get(cfg, f"{ro}.name", "vllm"))
    # vLLM-only: without chunked prefill a whole prompt must fit one scheduler step. sglang has its own
    # chunked prefill settings; verl versions that raise the value themselves make it a note.
    if engine == "vllm" and batched and not get(cfg, f"{ro}.enable_chunked_prefill", True) and batched < seq:
        keys = (f"{ro}.max_num_batched_tokens", f"{ro}.enable_chunked_prefill") + pr
        if ctx.verl_raises_batched_tokens:
            out.append(finding("lengths", INFO, keys,
                               f"without chunked prefill max_num_batched_tokens {batched} < max_model_len: the "
                               "installed verl raises it to max_model_len when the vLLM server starts (a larger "
                               "scheduler step than written)", f"set {ro}.max_num_batched_tokens >= {seq}"))
        else:
            out.append(finding("lengths", ERROR, keys,
                               f"without chunked prefill a {seq}-token sequence must fit max_num_batched_tokens {batched}",
                               f"set {ro}.max_num_batched_tokens >= {seq} or {ro}.enable_chunked_prefill=True"))
    # verl packs dynamic batches to limit x the role's sequence-parallel size (Ulysses for FSDP,
    # context parallel for Megatron): verl/workers/engine/utils.py, dp_actor, megatron_actor. The
    # size is read from the key the running worker reads (layout.ulysses).
    actor_sp, ref_sp = (train_layout(cfg, role, ctx.engine_workers).cp for role in ("actor", "ref"))
    for key, sp in ((f"{ARR}.actor.ppo_max_token_len_per_gpu", actor_sp),
                    (f"{ARR}.rollout.log_prob_max_token_len_per_gpu", actor_sp),
                    (f"{ARR}.ref.log_prob_max_token_len_per_gpu", ref_sp)):
        dyn_key = key.replace("ppo_max_token_len_per_gpu", "use_dynamic_bsz").replace(
            "log_prob_max_token_len_per_gpu", "log_prob_use_dynamic_bsz")
        limit = get_int(cfg, key)
        if get(cfg, dyn_key, False) and limit and limit * sp < seq:
            per = f" x sequence parallel {sp} = {limit * sp}" if sp > 1 else ""
            out.append(finding("lengths", ERROR, (key, dyn_key) + pr,
                               f"with dynamic batch size one {seq}-token sequence must fit "
                               f"{key.rsplit('.', 1)[1]}={limit}{per}",
                               f"set {key} >= {-(-seq // sp)}"))
    facts = ctx.facts
    if facts and facts.max_position_embeddings and seq > facts.max_position_embeddings:
        out.append(finding("lengths", ERROR, pr,
                           f"prompt {p} + response {r} = {seq} exceeds {facts.name}'s max_position_embeddings "
                           f"{facts.max_position_embeddings}: vLLM refuses max_model_len beyond it",
                           f"keep prompt + response <= {facts.max_position_embeddings} (or configure RoPE scaling)"))
    return out


def _stage_split_fix(layers: int, pp: int) -> str:
    if pp <= 2:
        return f"use a PP that divides {layers}"
    for first in range(layers // pp, 0, -1):
        rest = layers - 2 * first
        if rest > 0 and rest % (pp - 2) == 0:
            return (f"set num_layers_in_first_pipeline_stage={first} and num_layers_in_last_pipeline_stage={first} "
                    f"({pp - 2} middle stages x {rest // (pp - 2)} layers), or use a PP that divides {layers}")
    return f"use a PP that divides {layers}"


def pipeline(ctx: Context) -> list:
    if not ctx.facts:
        return []
    out, layers = [], ctx.facts.num_layers
    for lay in ctx.megatron_layouts():
        first, last = lay.first_stage_layers, lay.last_stage_layers
        keys = (lay.key("pipeline_model_parallel_size"), lay.otc_key("num_layers_in_first_pipeline_stage"),
                lay.otc_key("num_layers_in_last_pipeline_stage"))
        if lay.pp == 1:
            continue
        middle_stages = lay.pp - (first is not None) - (last is not None)
        rest = layers - (first or 0) - (last or 0)
        if first is None and last is None:
            if layers % lay.pp:
                out.append(finding("pipeline", ERROR, keys,
                                   f"{lay.role}: {ctx.facts.name} has {layers} layers, not divisible by PP {lay.pp}, and "
                                   "no first/last pipeline stage sizes are set for this role",
                                   f"{_stage_split_fix(layers, lay.pp)} (under {lay.otc_key('')[:-1]})"))
            continue
        bad = rest < 0 or (middle_stages == 0 and rest != 0) or (middle_stages > 0 and (rest % middle_stages or rest == 0))
        if bad:
            out.append(finding("pipeline", ERROR, keys,
                               f"{lay.role}: first stage {first} + last stage {last} layers leave {rest} of "
                               f"{ctx.facts.name}'s {layers} layers for {middle_stages} middle stages (PP {lay.pp}): "
                               "not an even split", _stage_split_fix(layers, lay.pp)))
        elif lay.vpp and middle_stages and (rest // middle_stages) % lay.vpp:
            out.append(finding("pipeline", ERROR, keys + (lay.key("virtual_pipeline_model_parallel_size"),),
                               f"{lay.role}: {rest // middle_stages} layers per stage do not split into VPP {lay.vpp} chunks",
                               "choose a VPP dividing the layers per stage"))
    return out


def heads(ctx: Context) -> list:
    facts = ctx.facts
    if not facts:
        return []
    out = []
    for lay in ctx.megatron_layouts():
        key = lay.key("tensor_model_parallel_size")
        if facts.num_heads % lay.tp or facts.num_kv_heads % lay.tp:
            out.append(finding("heads", ERROR, (key,),
                               f"{lay.role}: TP {lay.tp} must divide {facts.name}'s {facts.num_heads} attention heads and "
                               f"{facts.num_kv_heads} KV heads (Megatron splits query groups across TP)",
                               f"use a TP dividing {facts.num_kv_heads}: "
                               f"{[d for d in range(1, facts.num_kv_heads + 1) if facts.num_kv_heads % d == 0 and facts.num_heads % d == 0]}"))
    ro = rollout_layout(ctx.cfg)
    key = f"{ARR}.rollout.tensor_model_parallel_size"
    kv_ok = facts.num_kv_heads % ro.tp == 0 or ro.tp % facts.num_kv_heads == 0
    if facts.num_heads % ro.tp or not kv_ok:
        out.append(finding("heads", ERROR, (key,),
                           f"rollout: TP {ro.tp} must divide {facts.name}'s {facts.num_heads} attention heads, and KV "
                           f"heads {facts.num_kv_heads} must divide or be divisible by it (vLLM)",
                           f"use a rollout TP among {[d for d in (1, 2, 4, 8, 16) if facts.num_heads % d == 0]}"))
    return out


def experts(ctx: Context) -> list:
    facts = ctx.facts
    if not facts:
        return []
    out = []
    for lay in ctx.megatron_layouts():
        key = lay.key("expert_model_parallel_size")
        if facts.is_moe and facts.num_experts % lay.ep:
            out.append(finding("experts", ERROR, (key,),
                               f"{lay.role}: EP {lay.ep} does not divide {facts.name}'s {facts.num_experts} experts",
                               f"use an EP dividing {facts.num_experts}"))
        elif not facts.is_moe and lay.ep > 1:
            out.append(finding("experts", WARNING, (key,), f"{lay.role}: EP {lay.ep} set for dense {facts.name}",
                               f"remove {key} (it only applies to MoE models)"))
    ro = rollout_layout(ctx.cfg)
    if facts.is_moe and ro.ep > 1 and facts.num_experts % ro.ep:
        out.append(finding("experts", ERROR, (f"{ARR}.rollout.expert_parallel_size",),
                           f"rollout: EP {ro.ep} does not divide {facts.name}'s {facts.num_experts} experts",
                           f"use a rollout TP x DP dividing {facts.num_experts}"))
    return out


def known_bad(ctx: Context) -> list:
    out = []
    for lay in ctx.layouts():
        if lay.is_megatron and lay.use_mbridge and lay.vpp and lay.vpp > 1:
            out.append(finding("known-bad", ERROR, (lay.key("use_mbridge"), lay.key("virtual_pipeline_model_parallel_size")),
                               f"{lay.role}: mbridge cannot build models with virtual pipeline parallel (VPP {lay.vpp})",
                               f"remove {lay.key('virtual_pipeline_model_parallel_size')} or set use_mbridge=False "
                               "with a converted dist checkpoint"))
    device = str(get(ctx.cfg, "trainer.device", "cuda"))
    if device == "cuda" and not ctx.has_auto_set_device:
        if ctx.device_patch_active:
            out.append(finding("known-bad", WARNING, ("trainer.device",),
                               "trainer.device=cuda on a verl without auto_set_device (<= 0.6): only verl-ascend's "
                               "trainer_device patch turns it into npu, so every node needs verl-ascend installed",
                               "set trainer.device=npu"))
        else:
            out.append(finding("known-bad", ERROR, ("trainer.device",),
                               "trainer.device=cuda on a verl without auto_set_device (<= 0.6) and without verl-ascend's "
                               "trainer_device patch: Ray waits forever for GPU bundles on an NPU cluster",
                               "set trainer.device=npu"))
    return out


def env(ctx: Context) -> list:
    """The launch script's exported variables; needs no config."""
    out, launch_env, profile = [], ctx.launch_env, ctx.profile
    hccl, gloo = launch_env.get(ifname.HCCL) or "", launch_env.get(ifname.GLOO) or ""
    # the same decision as doctor's network.socket_ifname_pair (core.ifname), on the names the script writes
    why = (f"{ifname.HCCL if hccl else ifname.GLOO} is set but {ifname.GLOO if hccl else ifname.HCCL} is not"
           if bool(hccl) != bool(gloo) else hccl and ifname.disagreement(hccl, gloo))
    if why:
        out.append(finding("env", WARNING, (ifname.HCCL, ifname.GLOO),
                           f"{why}: 'Gloo connectFullMesh failed' / HCCL error 9 on multi-node jobs",
                           "export both to the same real interface (recipes/a2_env.sh: SOCKET_IFNAME=...)"))
    if profile.superpod and str(launch_env.get("HCCL_INTER_HCCS_DISABLE", "")).upper() == "TRUE":
        out.append(finding("env", WARNING, ("HCCL_INTER_HCCS_DISABLE",),
                           "HCCL_INTER_HCCS_DISABLE=TRUE: servers of one A3 SuperPoD talk over RoCE instead of HCCS",
                           "unset it (default FALSE) unless HCCS is known to be broken"))
    return out


def node(ctx: Context) -> list:
    """Ranks per node vs the device profile, and the visible-device list the launch exports."""
    out, prof = [], ctx.profile
    per_node = get_int(ctx.cfg, NODE[1], 8)
    if per_node != prof.ranks_per_node:
        note = " (an Atlas 200T A2 Box16 has 16)" if prof.name.startswith("a2") and per_node == 16 else ""
        out.append(finding("node", WARNING, (NODE[1],),
                           f"{NODE[1]}={per_node}, but a {prof.title} server has {prof.ranks_per_node} ranks"
                           f"{' (8 cards x 2 dies)' if prof.ranks_per_card == 2 else ''}{note}: the job leaves NPUs idle "
                           "or waits for ones that do not exist", f"set {NODE[1]}={prof.ranks_per_node}, or check "
                           f"with the --device that matches the cluster ({', '.join(PROFILES)})"))
    visible = ctx.launch_env.get("ASCEND_RT_VISIBLE_DEVICES")
    if visible:
        ids = [v for v in visible.split(",") if v.strip()]
        if len(ids) != per_node:
            out.append(finding("node", WARNING, ("ASCEND_RT_VISIBLE_DEVICES", NODE[1]),
                               f"ASCEND_RT_VISIBLE_DEVICES lists {len(ids)} devices, {NODE[1]}={per_node}",
                               f"list {per_node} device ids (0..{per_node - 1}"
                               + (", die indices on A3" if prof.ranks_per_card == 2 else "") + ")"))
    return out


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str       # the subject of its findings
    function: object
    doc: str
    needs_config: bool = True  # False: judged even when the config did not compose


ALL = (
    Rule("node", node, "n_gpus_per_node and ASCEND_RT_VISIBLE_DEVICES vs the device profile's ranks per server"),
    Rule("parallel", parallel, "world size vs TP x PP x CP, experts per stage, rollout replicas, TP across nodes"),
    Rule("batch", batch, "group size, train/mini/micro batch sizes over the data-parallel ranks"),
    Rule("lengths", lengths, "prompt + response vs the rollout's and the dynamic batch's token limits"),
    Rule("pipeline", pipeline, "layers over pipeline stages, first/last stage sizes, VPP chunks"),
    Rule("heads", heads, "attention and KV heads vs Megatron and rollout TP"),
    Rule("experts", experts, "experts vs EP of actor, ref and rollout"),
    Rule("known-bad", known_bad, "mbridge with VPP; trainer.device=cuda where verl does not map it"),
    Rule("hbm", hbm.estimate, "HBM per rank of the device profile, training and rollout phase"),
    Rule("bridge", bridge.findings, "the HF-Megatron bridge the workers import, installed here or not"),
    Rule("alloc", alloc.findings, "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True with vLLM sleep mode on"),
    Rule("roce", roce.findings, "HCCL_INTRA_ROCE_ENABLE per CANN version and rollout.checkpoint_engine.backend"),
    Rule("megatron_path", megatron_path.findings, "MindSpeed-only transformer options where MegatronAdaptor runs Megatron"),
    Rule("env", env, "the HCCL/Gloo variables the script exports", needs_config=False),
)


def run(ctx: Context, needs_config: bool) -> list:
    """The rules of :data:`ALL` that need a composed config (``ctx.cfg``), or those that judge the
    script alone (run even when the config does not compose)."""
    return [f for rule in ALL if rule.needs_config == needs_config for f in rule.function(ctx)]
