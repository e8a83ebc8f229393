"""The rehearsal's reward term: the recipe's score plus a value per response that differs inside a group."""

import importlib.util

from verl_ascend.rehearse.plan import reward


def _load(tmp_path, filtered=False):
    recipe = tmp_path / "recipe_reward.py"
    recipe.write_text("def score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return 0.0\n")
    path, note = reward.write(tmp_path / "run", str(recipe), "score", filtered=filtered)
    spec = importlib.util.spec_from_file_location("rehearsal_reward", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, note


def test_two_different_responses_of_a_group_rarely_tie(tmp_path):
    # GRPO needs a score that varies inside the group: 4 prompts x 2 responses all tied means grad_norm 0
    module, note = _load(tmp_path)
    pairs = [(f"response {i} a", f"response {i} b") for i in range(500)]
    ties = sum(module.compute_score("gsm8k", a, "1") == module.compute_score("gsm8k", b, "1") for a, b in pairs)
    assert ties <= 5, ties  # a coin per response tied ~250 of these
    scores = [module.compute_score("gsm8k", a, "1") for a, _ in pairs]
    assert 0.0 <= min(scores) and max(scores) <= reward.TERM and "rehearsal-only" in note


def test_with_the_group_filter_half_the_prompts_keep_the_recipes_constant_score(tmp_path):
    module, _ = _load(tmp_path, filtered=True)
    truths = [str(i) for i in range(200)]
    constant = [t for t in truths if len({module.compute_score("x", f"r{j}", t) for j in range(4)}) == 1]
    assert 50 < len(constant) < 150  # about half: those are filtered out for certain, the rest are kept
