"""Parallel layout read from a composed config: sizes per role, world size, data-parallel ranks."""

import dataclasses
from typing import Optional

from omegaconf import OmegaConf

ARR = "actor_rollout_ref"
RUNTIME_ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"  # what Ray's runtime env sets in every worker


# How an unset value can look in a composed config. YAML's null is None, but verl's own files also
# write `None`, which YAML reads as the *string* 'None' (verl 0.5.0's ref/megatron_ref.yaml:
# `expert_tensor_parallel_size: None`); verl's workers treat both as unset, so check does too.
_UNSET = ("none", "null", "~", "")


class BadValue(ValueError):
    """A config value check reads as a number is not one: reported as a finding (exit 2), never a traceback."""

    def __init__(self, key: str, value, kind: str):
        super().__init__(f"{key}={value!r} is not {kind}")
        self.key, self.value, self.kind = key, value, kind


def get(cfg, key: str, default=None):
    value = OmegaConf.select(cfg, key, default=default)
    if value is None or (isinstance(value, str) and value.strip().lower() in _UNSET):
        return default
    return value


def get_int(cfg, key: str, default=None):
    """``key`` as an int (``default`` when unset); BadValue when it is set to something else."""
    value = get(cfg, key, default)
    if value is None or isinstance(value, int):
        return None if value is None else int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    raise BadValue(key, value, "a whole number")


def get_float(cfg, key: str, default=None):
    value = get(cfg, key, default)
    if value is None or isinstance(value, (int, float)):
        return None if value is None else float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BadValue(key, value, "a number") from None


@dataclasses.dataclass
class TrainLayout:
    """Megatron (or FSDP) layout of the actor or the reference model."""

    role: str  # "actor" | "ref"
    strategy: str
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: Optional[int] = None
    first_stage_layers: Optional[int] = None
    last_stage_layers: Optional[int] = None
    use_mbridge: bool = False
    sp_key: str = ""  # the config key the sequence-parallel size (cp) was read from, for messages

    def key(self, name: str) -> str:
        return f"{ARR}.{self.role}.megatron.{name}"

    def otc_key(self, name: str) -> str:
        return f"{ARR}.{self.role}.megatron.override_transformer_config.{name}"

    @property
    def is_megatron(self) -> bool:
        return self.strategy == "megatron"

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    def dp(self, world: int) -> Optional[int]:
        return world // self.model_parallel if world % self.model_parallel == 0 else None


def ulysses(cfg, role: str, engine: bool) -> tuple:
    """(Ulysses SP size, the key it comes from) as the worker that runs reads it.

    The legacy FSDP worker (``fsdp_workers.py``) reads ``<role>.ulysses_sequence_parallel_size``
    only. The engine workers read the engine config, ``<role>.fsdp_config.ulysses_sequence_parallel_size``;
    the role's own key still wins when it is above 1 (verl's FSDPActorConfig copies it over, for old
    recipes) -- see ``verl/workers/config/actor.py`` and ``verl/workers/engine/fsdp/transformer_impl.py``."""
    legacy_key = f"{ARR}.{role}.ulysses_sequence_parallel_size"
    legacy = get_int(cfg, legacy_key, 1)
    engine_key = f"{ARR}.{role}.fsdp_config.ulysses_sequence_parallel_size"
    if engine and legacy <= 1 and OmegaConf.select(cfg, engine_key) is not None:
        return get_int(cfg, engine_key, 1), engine_key
    return legacy, legacy_key


def train_layout(cfg, role: str, engine: bool = False) -> TrainLayout:
    """``engine``: verl's engine workers run this role (trainer_path.engine_workers), not the legacy ones."""
    base = f"{ARR}.{role}"
    strategy = get(cfg, f"{base}.strategy", get(cfg, f"{ARR}.actor.strategy", "fsdp"))
    if strategy != "megatron":
        sp, key = ulysses(cfg, role, engine)
        return TrainLayout(role, strategy, cp=sp, sp_key=key)
    m = f"{base}.megatron"
    tp = get_int(cfg, f"{m}.tensor_model_parallel_size", 1)
    return TrainLayout(
        role, strategy, tp=tp,
        pp=get_int(cfg, f"{m}.pipeline_model_parallel_size", 1),
        cp=get_int(cfg, f"{m}.context_parallel_size", 1),
        ep=get_int(cfg, f"{m}.expert_model_parallel_size", 1),
        # Megatron uses the dense TP for experts unless expert_tensor_parallel_size says otherwise
        etp=get_int(cfg, f"{m}.expert_tensor_parallel_size", tp),
        vpp=get_int(cfg, f"{m}.virtual_pipeline_model_parallel_size"),
        first_stage_layers=get_int(cfg, f"{m}.override_transformer_config.num_layers_in_first_pipeline_stage"),
        last_stage_layers=get_int(cfg, f"{m}.override_transformer_config.num_layers_in_last_pipeline_stage"),
        use_mbridge=bool(get(cfg, f"{m}.use_mbridge", False)),
        sp_key=f"{m}.context_parallel_size",
    )


@dataclasses.dataclass
class RolloutLayout:
    tp: int
    dp: int
    pp: int
    ep: int
    name: str

    @property
    def replica(self) -> int:
        return self.tp * self.dp * self.pp


def rollout_layout(cfg) -> RolloutLayout:
    r = f"{ARR}.rollout"
    return RolloutLayout(tp=get_int(cfg, f"{r}.tensor_model_parallel_size", 1),
                         dp=get_int(cfg, f"{r}.data_parallel_size", 1),
                         pp=get_int(cfg, f"{r}.pipeline_model_parallel_size", 1),
                         ep=get_int(cfg, f"{r}.expert_parallel_size", 1),
                         name=str(get(cfg, f"{r}.name", "")))


def node_shape(cfg) -> tuple:
    """(trainer.nnodes, trainer.n_gpus_per_node), with verl's defaults where the config leaves them out."""
    return get_int(cfg, "trainer.nnodes", 1), get_int(cfg, "trainer.n_gpus_per_node", 8)


def world_size(cfg) -> int:
    nodes, per_node = node_shape(cfg)
    return nodes * per_node
