"""One gsm8k row -> one verl row: the final answer parsed strictly, never guessed."""

import re
import sys

DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
SPLITS = ("train", "test")

# verl's preprocessing and its strict gsm8k reward both read the number right after "#### ".
_FINAL = re.compile(r"#### (-?[0-9.,]+)")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def parse_answer(answer):
    """(ground_truth, None) for a usable gsm8k answer, else (None, why it is unusable)."""
    if not isinstance(answer, str) or not answer.strip():
        return None, "answer is empty"
    values = {m.replace(",", "") for m in _FINAL.findall(answer)}
    if not values:
        return None, "no '#### <number>' final answer"
    if len(values) > 1:
        return None, f"several different final answers: {', '.join(sorted(values))}"
    value = values.pop()
    if not _NUMBER.fullmatch(value):
        return None, f"final answer {value!r} is not a number"
    return value, None


def verl_row(split: str, index: int, question: str, answer: str, ground_truth: str) -> dict:
    """One output row, keys and nesting as verl's gsm8k preprocessing writes them."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": question + " " + INSTRUCTION}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
    }


def convert(table, split: str, progress: bool = True):
    """(rows, problems): verl rows for the usable source rows; (index, why, answer) for the others."""
    from tqdm import tqdm

    rows, problems = [], []
    questions = table.column("question").to_pylist()
    answers = table.column("answer").to_pylist()
    for index, (question, answer) in enumerate(
        tqdm(zip(questions, answers), total=len(questions), desc=f"gsm8k {split}", unit="row",
             disable=None if progress else True, file=sys.stderr)
    ):
        truth, why = parse_answer(answer)
        if why is None and not (isinstance(question, str) and question.strip()):
            why = "question is empty"
        if why is not None:
            problems.append((index, why, answer))
            continue
        rows.append(verl_row(split, index, question, answer, truth))
    return rows, problems


def describe(problem) -> str:
    index, why, answer = problem
    tail = answer[-60:] if isinstance(answer, str) else answer
    return f"row {index}: {why} (answer ends {tail!r})"
