"""The settings table owns each switch's valid words: a patch that must not run on a wrong one gets
them from there, in its error, and the table's own check agrees."""

import pytest

from verl_ascend.core import settings

pytestmark = pytest.mark.verl_agnostic

WORD_SWITCHES = [s for s in settings.TABLE if s.choices]


def test_the_word_switches_are_in_the_table():
    assert {s.name for s in WORD_SWITCHES} >= {"VERL_ASCEND_ROLLOUT_ORDER", "VERL_ASCEND_CKPT_VALIDATION"}


@pytest.mark.parametrize("setting", WORD_SWITCHES, ids=lambda s: s.name)
def test_every_word_is_accepted_in_any_case_and_unset_is_the_default(setting):
    for word in setting.choices:
        assert settings.choose(setting.name, "x", {setting.name: f" {word.upper()} "}) == word
        assert settings.problem(setting.name, {setting.name: word}) is None
        assert word in setting.valid
    assert settings.choose(setting.name, "x", {}) == setting.default


@pytest.mark.parametrize("setting", WORD_SWITCHES, ids=lambda s: s.name)
def test_a_wrong_word_raises_naming_it_and_every_valid_one(setting):
    env = {setting.name: "nonsense"}
    with pytest.raises(ValueError) as err:
        settings.choose(setting.name, "a thing", env)
    text = str(err.value)
    assert f"{setting.name}='nonsense' is not a thing" in text
    for word, meaning in setting.choices.items():
        assert f"{setting.name}={word} ({meaning})" in text
    assert settings.problem(setting.name, env)  # status reports the same value as invalid


@pytest.mark.parametrize("word", settings.DEVICE_OFF)
def test_every_off_word_of_the_device_switch_turns_ascend_handling_off(word, monkeypatch):
    from verl_ascend.core import platform

    monkeypatch.setenv("VERL_ASCEND_DEVICE", f" {word.upper()} ")
    assert settings.get("VERL_ASCEND_DEVICE") == "cpu" and settings.problem("VERL_ASCEND_DEVICE") is None
    assert platform.ascend_evidence() == [] and platform.not_ascend_reason() == "VERL_ASCEND_DEVICE=cpu"


def test_the_readme_row_of_the_device_switch_names_every_off_word():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (row,) = re.findall(r"^\| `VERL_ASCEND_DEVICE` \|.*$", readme, re.M)
    assert all(f"`{word}`" in row for word in settings.DEVICE_OFF), row
    assert settings.problem("VERL_ASCEND_DEVICE", {"VERL_ASCEND_DEVICE": "gpu"})  # not an off word: invalid
