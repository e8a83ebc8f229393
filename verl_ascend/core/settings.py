"""Every ``VERL_ASCEND*`` environment switch: one table, parsed in one place, shown by ``status``.

Each value is parsed the first time it is read (and again only if the variable changes); a bad
value gives one WARNING naming the valid ones and the default is used instead, so a typo never
stops a job. Standard library only: the activation reads ``VERL_ASCEND`` at interpreter start.
"""

import os

ON = ("1", "true", "on", "yes")
OFF = ("0", "false", "off", "no")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# VERL_ASCEND_DEVICE: every word that turns Ascend handling off; all of them parse to "cpu", so code
# asks only `== "cpu"` (core.platform) and this tuple is the one place the words are spelled.
DEVICE_OFF = ("cpu", "off", "none", "0")


class Setting:
    """One switch. ``parse(raw)`` returns the value or raises ValueError; ``valid`` is what a user may
    type; ``choices`` (value -> what it does) for a switch that takes one of a few words. (A plain
    class: ``typing`` and ``collections`` are not loaded yet at interpreter start.)"""

    __slots__ = ("name", "default", "valid", "parse", "doc", "choices")

    def __init__(self, name, default, valid, parse, doc, choices=None):
        self.name, self.default, self.valid, self.parse, self.doc = name, default, valid, parse, doc
        self.choices = choices


def _switch(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    raise ValueError


def _choice(*options):
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError
        return value

    return parse


def _device(raw: str) -> str:
    value = raw.strip().lower()
    if value in DEVICE_OFF:
        return "cpu"
    if value in ("auto", "npu"):
        return value
    raise ValueError


def _level(raw: str) -> str:
    value = raw.strip().upper()
    if value not in LOG_LEVELS:
        raise ValueError
    return value


def _one_of(name, default, choices: dict, doc, note=""):
    """A switch that takes one word of ``choices`` (or is unset: ``default``)."""
    valid = "|".join(choices) + (f" ({note})" if note else "")
    return Setting(name, default, valid, _choice(default, *choices), doc, choices)


def _names(raw: str) -> frozenset:
    """``-a,-b`` switches patches off; a bare name is accepted too. Names are checked by the registry."""
    return frozenset(item.strip().lstrip("-") for item in raw.split(",") if item.strip().lstrip("-"))


TABLE = (
    Setting("VERL_ASCEND", True, "1/0 (also true/false, on/off, yes/no)", _switch,
            "the plugin as a whole; 0 leaves every process of the environment untouched"),
    Setting("VERL_ASCEND_PATCHES", frozenset(), "-name[,-name...] (see `verl-ascend status` for the names)", _names,
            "switch single runtime patches off"),
    Setting("VERL_ASCEND_LOG_LEVEL", "INFO", "|".join(LOG_LEVELS), _level,
            "the plugin's log level (patch lines are DEBUG)"),
    Setting("VERL_ASCEND_DEVICE", "auto", f"auto|npu|cpu (also {', '.join(DEVICE_OFF[1:])}: the same as cpu)", _device,
            "force the Ascend-host verdict: npu = treat as Ascend, cpu = never"),
    _one_of("VERL_ASCEND_ROLLOUT_ORDER", "", {"tiled": "spread each prompt's samples over the rollout workers",
                                              "interleaved": "verl's own order"},
            "rollout dispatch order of the rollout_order patch", "empty: tiled on Ascend hosts"),
    _one_of("VERL_ASCEND_CKPT_VALIDATION", "fast", {"fast": "keeps every check, near-linear", "skip": "turns them off",
                                                    "stock": "leaves torch's own checks"},
            "distributed-checkpoint shard checks: near-linear (fast), none (skip) or torch's own (stock)"),
    Setting("VERL_ASCEND_REHEARSE", False, "1/0", _switch,  # in_rehearsal() below
            "set by `verl-ascend rehearse` in its main_ppo: the CPU-only fixes act in that run only"),
)
_BY_NAME = {s.name: s for s in TABLE}
REHEARSE = "VERL_ASCEND_REHEARSE"
_parsed: dict = {}  # name -> (raw, value, error)
_warned: set = set()


def _parse(setting: Setting, raw) -> tuple:
    if raw is None or (raw.strip() == "" and setting.default != ""):
        return setting.default, None
    try:
        return setting.parse(raw), None
    except ValueError:
        return setting.default, (f"{setting.name}={raw!r} is not valid ({setting.valid}); "
                                 f"using {setting.default!r}")


def get(name: str, environ=None):
    """The parsed value of one switch (``environ`` defaults to the process environment)."""
    setting = _BY_NAME[name]
    raw = (os.environ if environ is None else environ).get(name)
    if environ is not None:
        return _parse(setting, raw)[0]
    cached = _parsed.get(name)
    if cached is None or cached[0] != raw:
        cached = (raw, *_parse(setting, raw))
        _parsed[name] = cached
    if cached[2] and (name, raw) not in _warned:
        _warned.add((name, raw))
        import logging  # only on the unhappy path: activation stays import-light

        logging.getLogger("verl_ascend").warning(cached[2])
    return cached[1]


def problem(name: str, environ=None):
    """Why the current value of ``name`` is not valid, or None."""
    setting = _BY_NAME[name]
    return _parse(setting, (os.environ if environ is None else environ).get(name))[1]


def choose(name: str, what: str, environ=None):
    """The value of a switch taking one of a few words, for code that must not run on a wrong one: a
    bad value raises ValueError naming it and every valid word with what it does (no fallback)."""
    setting = _BY_NAME[name]
    env = os.environ if environ is None else environ
    if _parse(setting, env.get(name))[1]:
        options = [f"{name}={value} ({meaning})" for value, meaning in setting.choices.items()]
        raise ValueError(f"{name}={env.get(name)!r} is not {what}; set " + ", ".join(options[:-1]) + f" or {options[-1]}")
    return get(name, environ)


def enabled(environ=None) -> bool:
    return get("VERL_ASCEND", environ)


def report(environ=None) -> list:
    """One row per switch, for ``status``: what is set, what it means, and any problem."""
    env = os.environ if environ is None else environ
    rows = []
    for s in TABLE:
        value, error = _parse(s, env.get(s.name))
        rows.append({"name": s.name, "raw": env.get(s.name), "value": sorted(value) if isinstance(value, frozenset)
                     else value, "valid": s.valid, "doc": s.doc, "problem": error})
    return rows


def in_rehearsal(environ=None) -> bool:
    """A process of a ``verl-ascend rehearse`` run (set for its main_ppo; ``ray_runtime_env`` carries it to
    the Ray workers). The rehearsal-only records act there only; ``mindspeed`` also acts there."""
    return bool(get(REHEARSE, environ))
