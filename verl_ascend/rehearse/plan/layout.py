"""A Megatron recipe's parallel layout and layer counts, scaled to the rehearsal's CPU ranks and tiny model.

Every parallel kind the composed config gives a role (TP, PP, EP, ETP, CP, VPP) is kept above 1 where
the ranks allow; every layer-count key of ``override_transformer_config`` (uneven first/last pipeline
stages, layers per virtual stage, recompute counts, the MoE layer pattern, dense-layer counts) is
scaled with the tiny model's layers, whose number is the smallest megatron-core accepts for the
chosen layout. Keys megatron-core's ``TransformerConfig`` does not have (MindSpeed's ``use_flash_attn``
and the like) stay where MindSpeed runs and are dropped where plain megatron-core does, which would
refuse them (``TypeError: TransformerConfig.__init__() got an unexpected keyword argument``).
Each kept, scaled or dropped value is a line of ``changes.txt`` with both values.
"""

import dataclasses
import itertools
import re
from typing import Optional

from omegaconf import OmegaConf

from verl_ascend.recipe.layout import ARR, train_layout

ROLES = ("actor", "ref")
# (short name, verl's megatron key), in the order a tie between layouts is settled: TP first (tensor
# parallel with its sequence-parallel collectives is what more code depends on), then PP, EP, ETP, VPP
KINDS = (("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
         ("ep", "expert_model_parallel_size"), ("etp", "expert_tensor_parallel_size"),
         ("vpp", "virtual_pipeline_model_parallel_size"), ("cp", "context_parallel_size"))
FIRST, LAST = "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"
MAX_LAYERS = 16
# megatron's local DotProductAttention (the spec a CPU runs; TE's does CP) asserts context_parallel_size == 1
CP_REASON = "megatron's local attention (no Transformer Engine on CPU) refuses context parallelism"


@dataclasses.dataclass(frozen=True)
class Sizes:
    tp: int = 1
    pp: int = 1
    ep: int = 1
    etp: int = 1                # effective: megatron uses TP for the experts when the config leaves it unset
    vpp: Optional[int] = None
    cp: int = 1

    def get(self, kind: str) -> int:
        return getattr(self, kind) or 1

    def text(self, moe: bool, etp_default: bool = False) -> str:
        parts = [f"TP{self.tp}", f"PP{self.pp}"]
        if moe:
            parts += [f"EP{self.ep}", f"ETP{self.etp}" + (" (megatron's default: TP)" if etp_default else "")]
        if self.vpp and self.vpp > 1:
            parts.append(f"VPP{self.vpp}")
        if self.cp > 1:
            parts.append(f"CP{self.cp}")
        return " ".join(parts)


@dataclasses.dataclass
class RoleLayout:
    role: str
    recipe: Sizes
    new: Sizes
    etp_unset: bool              # the config leaves expert_tensor_parallel_size to megatron (= TP)
    transformer: dict            # the composed override_transformer_config (resolved)
    first: Optional[int] = None  # the tiny model's uneven pipeline split, when the recipe has one
    last: Optional[int] = None


@dataclasses.dataclass
class Layout:
    roles: dict                  # role -> RoleLayout
    layers: int                  # the tiny model's layer count
    real_layers: int
    nproc: int
    moe: bool
    overrides: list              # main_ppo overrides the rehearsal adds
    replaced: dict               # recipe override key -> reason (the recipe's item is dropped)
    changes: list                # lines for changes.txt, old -> new

    @property
    def note(self) -> str:
        actor = self.roles.get("actor")
        if actor is None:
            return f"{self.nproc} CPU rank(s), tiny model {self.layers} layers"
        dp = self.nproc // (actor.new.tp * actor.new.pp * actor.new.cp)
        kept = [k.upper() for k, _ in KINDS if actor.recipe.get(k) > 1 and actor.new.get(k) > 1
                and (self.moe or k not in ("ep", "etp"))]
        return (f"recipe {actor.recipe.text(self.moe, actor.etp_unset)} -> {actor.new.text(self.moe)} (DP{dp}) on "
                f"{self.nproc} CPU rank(s); kept {' '.join(kept) if kept else 'no model parallelism'}; tiny model "
                f"{self.layers} layers")


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(recipe: Sizes, nproc: int, experts: int) -> list:
    """Every layout megatron-core can build on ``nproc`` ranks, no kind above the recipe's.

    Dense: TP x PP x CP divides the ranks. Experts: each pipeline stage's ranks are also split as
    ETP x EP x expert-DP, EP divides the experts. CP stays 1 (:data:`CP_REASON`)."""
    found = []
    for tp, pp in itertools.product(_divisors(nproc), repeat=2):
        if tp > recipe.tp or pp > recipe.pp or nproc % (tp * pp):
            continue
        stage = nproc // pp
        eps = [e for e in _divisors(stage) if e <= recipe.ep and (not experts or experts % e == 0)] if experts else [1]
        for ep in eps:
            etps = [t for t in _divisors(stage // ep) if t <= recipe.etp] if experts else [tp]
            for etp in etps:
                vpps = [None] + ([v for v in range(2, (recipe.vpp or 1) + 1)] if pp > 1 else [])
                found += [Sizes(tp=tp, pp=pp, ep=ep, etp=etp, vpp=vpp, cp=1) for vpp in vpps]
    return found


def _score(recipe: Sizes, new: Sizes, moe: bool) -> tuple:
    kinds = [k for k, _ in KINDS if moe or k not in ("ep", "etp")]
    kept = tuple(recipe.get(k) > 1 and new.get(k) > 1 for k in kinds)
    return (sum(kept), kept, sum(new.get(k) for k in kinds), new.etp == new.tp)


def choose(recipe: Sizes, nproc: int, experts: int) -> Sizes:
    moe = bool(experts)
    return max(candidates(recipe, nproc, experts), key=lambda s: _score(recipe, s, moe))


def stage_split(layers: int, sizes: Sizes, first, last, real_layers: int):
    """(first, last) of the tiny model's uneven split closest to the recipe's shares, or None if ``layers``
    cannot be split that way (megatron-core's checks: every stage > 0 layers, the middle stages even,
    each stage divisible by the virtual stages); (None, None) when the recipe has no uneven split."""
    vpp = sizes.vpp or 1
    if first is None and last is None or sizes.pp == 1:
        if layers % (sizes.pp * vpp) or layers < sizes.pp * vpp:
            return None
        return None, None
    best = None
    for f in ([None] if first is None else range(1, layers + 1)):
        for la in ([None] if last is None else range(1, layers + 1)):
            middle = layers - (f or 0) - (la or 0)
            stages = sizes.pp - (f is not None) - (la is not None)
            if middle < 0 or bool(middle) != bool(stages) or any(x is not None and x % vpp for x in (f, la)):
                continue
            if stages and (middle % stages or (middle // stages) % vpp):
                continue
            miss = sum(abs(x / layers - r / real_layers) for x, r in ((f, first), (la, last)) if x is not None)
            if best is None or miss < best[0]:
                best = (miss, f, la)
    return None if best is None else best[1:]


def tiny_layers(layouts, real_layers: int, minimum: int = 2) -> int:
    for layers in range(minimum, MAX_LAYERS + 1):
        if all(stage_split(layers, r.new, _int(r.transformer.get(FIRST)), _int(r.transformer.get(LAST)), real_layers)
               is not None for r in layouts):
            return layers
    raise ValueError(f"no tiny model of <= {MAX_LAYERS} layers fits the layout")


def _int(value):
    try:
        return None if value is None or str(value).strip().lower() in ("none", "null", "") else int(value)
    except (TypeError, ValueError):
        return None


def _pattern(value) -> Optional[list]:
    """moe_layer_freq as a per-layer list: a list, or megatron's ``([0]*3+[1]*58)`` form; None for an int."""
    if isinstance(value, (list, tuple)):
        return [int(x) for x in value]
    text = str(value).strip().strip("()").replace(" ", "")
    parts = re.findall(r"\[(\d+(?:,\d+)*)\]\*(\d+)", text)
    if not parts or "".join(f"[{a}]*{n}" for a, n in parts).replace("][", "") != text.replace("+", ""):
        return None
    return [int(x) for a, n in parts for x in a.split(",") * int(n)]


def _scaled_count(value: int, layers: int, real_layers: int, ceiling: int) -> int:
    return max(1, min(ceiling, round(value * layers / max(1, real_layers))))


def scale_transformer(r: RoleLayout, layers: int, real_layers: int, fields, mindspeed: bool) -> dict:
    """key -> (old, new or None to drop, why) for every layer-count key and every key plain megatron-core
    refuses (a layer count that stays the same is listed too: checked, kept)."""
    out = {}
    per_stage = layers // max(1, r.new.pp * (r.new.vpp or 1))
    if r.first is not None or r.last is not None:
        per_stage = min(x // (r.new.vpp or 1) for x in (r.first, r.last) if x is not None)
    for key, old in r.transformer.items():
        if old is None:
            continue
        if key in (FIRST, LAST):
            new = r.first if key == FIRST else r.last
            why = (f"PP{r.new.pp}: no pipeline here, megatron would build {old} layers on the one stage"
                   if r.new.pp == 1 else f"the tiny model's {layers} layers split over PP{r.new.pp}, nearest "
                   f"the recipe's share ({old} of {real_layers})")
            out[key] = (old, new, why)
        elif key == "num_layers_per_virtual_pipeline_stage" and _int(old):
            new = max(1, layers // (r.new.pp * (r.new.vpp or 1))) if r.new.pp > 1 else None
            out[key] = (old, new, f"{layers} layers over PP{r.new.pp} VPP{r.new.vpp or 1}")
        elif key == "recompute_num_layers" and _int(old):
            out[key] = (old, _scaled_count(_int(old), layers, real_layers, max(1, per_stage)),
                        f"{old} of {real_layers} layers -> of the tiny model's {layers} ({per_stage} per stage)")
        elif key == "first_k_dense_replace" and _int(old):
            out[key] = (old, _scaled_count(_int(old), layers, real_layers, layers - 1), "dense layers scaled")
        elif key == "moe_layer_freq" and _pattern(old) is not None:
            pattern = _pattern(old)
            new = [pattern[i * len(pattern) // layers] for i in range(layers)]
            out[key] = (old, new, f"the recipe's MoE/dense pattern resampled to {layers} layers")
    if fields is not None and not mindspeed:
        for key, old in r.transformer.items():
            if key not in fields and key not in out:
                out[key] = (old, None, "not a field of megatron-core's TransformerConfig (a MindSpeed option); "
                                       "plain megatron-core refuses it, MindSpeed is not importable here")
    return out


def _otc_from(cfg, role: str) -> dict:
    node = OmegaConf.select(cfg, f"{ARR}.{role}.megatron.override_transformer_config")
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}


def _value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(str(x) for x in value) + "]"
    return str(value)


def plan(cfg, nproc: int, *, real_layers: int, experts: int, fields=None, mindspeed: bool = False,
         ref_own_transformer: bool = False, recipe_keys=()) -> Layout:
    """The layout of every Megatron role of the composed config ``cfg`` on ``nproc`` CPU ranks.

    ``fields``: megatron-core's TransformerConfig field names (None: unknown, nothing is dropped);
    ``recipe_keys``: the keys the recipe's overrides set (their items are the ones replaced)."""
    layouts = {}
    for role in ROLES:
        lay = train_layout(cfg, role, engine=True)
        etp_unset = OmegaConf.select(cfg, f"{ARR}.{role}.megatron.expert_tensor_parallel_size") in (None, "None", "null")
        recipe = Sizes(tp=lay.tp, pp=lay.pp, ep=lay.ep, etp=lay.etp, vpp=lay.vpp, cp=lay.cp)
        layouts[role] = RoleLayout(role, recipe, choose(recipe, nproc, experts), etp_unset, _otc_from(cfg, role))
    layers = tiny_layers(layouts.values(), real_layers)
    overrides, replaced, changes = [], {}, []
    for role, r in layouts.items():
        split = stage_split(layers, r.new, _int(r.transformer.get(FIRST)), _int(r.transformer.get(LAST)), real_layers)
        r.first, r.last = split
        base = f"{ARR}.{role}.megatron"
        moved = []
        for kind, key in KINDS:
            old, new = r.recipe.get(kind), r.new.get(kind)
            value = r.new.vpp if kind == "vpp" else new
            if kind == "etp" and (not experts or (r.etp_unset and new == r.new.tp)):
                value = None  # megatron's default (TP), as the recipe leaves it
            overrides.append(f"{base}.{key}={_value(value)}")
            replaced[f"{base}.{key}"] = "parallel sizes -> scaled to the CPU ranks"
            if (kind in ("ep", "etp") and not experts) or (kind == "vpp" and (r.recipe.vpp or 1) == 1):
                continue
            why = f" ({CP_REASON})" if kind == "cp" and old > 1 else ""
            moved.append(f"{kind.upper()} {old}{' (= TP, megatron default)' if kind == 'etp' and r.etp_unset else ''}"
                         f" -> {new}{why}")
        changes.append(f"layout {role}: {', '.join(moved)}")
        if role == "ref" and not ref_own_transformer:
            changes.append("layout ref: override_transformer_config inherited from the actor (verl's oc.select)")
            continue
        for key, (old, new, why) in scale_transformer(r, layers, real_layers, fields, mindspeed).items():
            full = f"{base}.override_transformer_config.{key}"
            if new is not None and str(new) == str(old):
                changes.append(f"kept: {full}: {_value(old)} -> {_value(new)} ({why})")
                continue
            if new is None:
                overrides.append(f"~{full}" if full not in recipe_keys else "")
                verb = "dropped"
            else:
                overrides.append(f"++{full}={_value(new)}")
                verb = "scaled"
            replaced[full] = "layer counts and MindSpeed-only keys -> see the layout lines"
            changes.append(f"{verb}: {full}: {_value(old)} -> {_value(new) if new is not None else '(dropped)'} ({why})")
    return Layout(layouts, layers, real_layers, nproc, bool(experts), [o for o in overrides if o], replaced, changes)
