"""The rehearsal's reward: the recipe's own reward function, plus a small term that varies in each group.

Why: a tiny random model answers nothing right, so the recipe's rule (gsm8k, DAPO's math scorer)
gives every response of a prompt the same score; GRPO and DAPO normalise within the group, the
advantages are all 0, and ``grad_norm`` is 0: a working update cannot be told from a broken one.
How: a file written into the run folder and named as ``reward.custom_reward_function`` calls the
recipe's function (its ``custom_reward_function.path``/``name``, or verl's
``default_compute_score`` when the recipe has none) with every argument verl passes, so its faults
surface as they would on the cluster, then adds ``TERM`` x (crc32 of the response mod 1000) / 999: a
deterministic value per response. Two different responses of a group tie with odds 1/1000; a coin
(crc32 mod 2) tied every group of a 4-prompt, 2-response batch one step in 16, and grad_norm read 0
(CI, 2026-12-01). A dict result gets the term on ``score`` (and on ``acc``, which DAPO's group filter
reads); the term itself is reported as ``rehearsal_term``.
With DAPO's group filter on, the term is added only to prompts whose ground truth hashes even: the
other half keep the recipe's constant score and are certain to be filtered out (evicted and
refilled), so the filter is exercised by construction rather than by chance.
"""

from pathlib import Path

TERM = 0.1

_TEMPLATE = '''"""Written by verl-ascend rehearse (verl_ascend/rehearse/reward.py): the recipe's reward + a varying term."""
import importlib.util
import zlib

RECIPE_PATH = {path!r}
RECIPE_NAME = {name!r}
TERM = {term!r}
HALF = {half!r}  # DAPO's group filter on: only half the prompts get the term (the rest are evicted)
_fn = []


def _recipe_fn():
    if not _fn:
        if RECIPE_PATH:
            spec = importlib.util.spec_from_file_location("recipe_reward", RECIPE_PATH)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _fn.append(getattr(module, RECIPE_NAME))
        else:
            from verl.utils.reward_score import default_compute_score

            _fn.append(default_compute_score)
    return _fn[0]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _recipe_fn()(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    term = TERM * (zlib.crc32(str(solution_str).encode()) % 1000) / 999
    if HALF and zlib.crc32(str(ground_truth).encode()) % 2:
        term = 0.0
    if isinstance(result, dict):
        result = dict(result)
        result["score"] = float(result.get("score", 0.0)) + term
        if "acc" in result:
            result["acc"] = float(result["acc"]) + term
        result["rehearsal_term"] = term
        return result
    return float(result) + term
'''


def write(folder: Path, recipe_path: str = "", recipe_name: str = "compute_score", filtered: bool = False) -> tuple:
    """(file, description) of the rehearsal's reward for a recipe whose own is at ``recipe_path``."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "rehearsal_reward.py"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(_TEMPLATE.format(path=recipe_path or "", name=recipe_name or "compute_score", term=TERM, half=bool(filtered)))
    tmp.replace(target)
    own = f"{recipe_path}:{recipe_name}" if recipe_path else "verl's default_compute_score (the recipe sets none)"
    return str(target), (f"reward: the recipe's ({own}) + a rehearsal-only {TERM} x (crc32(response) mod 1000) / 999, "
                         "so rewards vary inside each group and GRPO/DAPO have advantages"
                         + ("; with DAPO's group filter only for prompts whose ground truth hashes even, so the "
                            "others are filtered out for certain" if filtered else "") + " (rehearsal_reward.py)")
