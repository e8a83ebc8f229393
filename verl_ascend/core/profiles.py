"""Device profiles: what one rank of a recipe runs on, so memory and layout rules use the right numbers.

One rank is one NPU on A2 and A5, one *die* on A3 (a 910C card holds two dies, each its own device
and rank, 64 GB each). The profile is chosen by the user (``check --device``), never guessed from
``n_gpus_per_node``: an A2 Atlas 200T Box16 also has 16 ranks per server. Sources (public):
verl's Ascend quick start (A3: ``n_gpus_per_node=16``), CANN's HCCL guide (A3 rank table: each die a
rank), npu-smi outputs in vllm-ascend issues #3657 / #2035 (910B4-1 65536 MB, A3 die 65536 MB) and
1Panel-dev/1Panel#9472 (910B4: 32768 MB). A5 HBM is from press reports only (provisional).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    title: str
    rank_gb: float        # HBM one rank can use
    ranks_per_node: int   # n_gpus_per_node of a full server
    rank_word: str        # "card" or "die": what the numbers are per
    ranks_per_card: int
    superpod: bool = False  # servers joined by HCCS inside a SuperPoD


PROFILES = {
    "a2": Profile("a2", "Atlas 800T A2, 910B 64 GB", 64.0, 8, "card", 1),
    "a2-32g": Profile("a2-32g", "Atlas A2 with 910B4, 32 GB", 32.0, 8, "card", 1),
    "a3": Profile("a3", "Atlas 800T / 900 A3, 910C: 2 dies x 64 GB per card", 64.0, 16, "die", 2, superpod=True),
    "a5": Profile("a5", "Ascend 950 (A5), 128 GB (provisional, press figures)", 128.0, 8, "card", 1),
}
DEFAULT = "a2"


def get(name: str) -> Profile:
    return PROFILES[name]
