"""Run every stage of the check on one recipe and collect a :class:`Report` (``run_check``: its JSON form)."""

import contextlib
import dataclasses
import importlib.util
import os
import sys

from verl_ascend.core import findings as _findings
from verl_ascend.core import profiles
from verl_ascend.core.findings import ERROR, INFO, exit_code, finding
from verl_ascend.recipe import compose, extract, model_facts
from verl_ascend.recipe.layout import ARR, BadValue, get, rollout_layout, train_layout, world_size

from . import rules, trainer_path, verl_checks


def _verl_features() -> tuple:
    """(verl version, has auto_set_device, verl-ascend's trainer_device patch active here)."""
    import verl

    from verl_ascend.core import registry

    try:
        from verl.utils.device import auto_set_device  # noqa: F401

        has_auto = True
    except ImportError:
        has_auto = False
    active = "trainer_device" in registry.names() and "trainer_device" not in registry.disabled_names()
    return getattr(verl, "__version__", "unknown"), has_auto, active


class BadCheckInput(_findings.BadInput):
    """No recipe file, a bad --set or --verl-src, no verl here: nothing of the recipe runs."""


@dataclasses.dataclass
class Report:
    """What check found about one recipe: the header facts (``None`` where that stage was not reached),
    the findings, and the exit code they give."""

    recipe: str
    device: dict
    findings: list = dataclasses.field(default_factory=list)  # Finding records, in the order found
    skipped: list = None          # recipe commands not run (pkill, rm, pip, ...)
    entry: str = None             # python -m <entry>
    config_name: str = None
    overrides: list = None
    config_source: str = None
    verl_version: str = None
    trainer: str = None           # the trainer loop verl runs for this config
    model: dict = None
    layout: dict = None
    verl_validation: dict = None  # {ran: [...], errors: [...]}

    @property
    def exit_code(self) -> int:
        return exit_code(self.findings)

    def _facts(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "findings" and getattr(self, f.name) is not None}

    def as_dict(self) -> dict:
        return _findings.envelope("check", self.findings, **self._facts())

    def to_json(self) -> str:
        return _findings.to_json("check", self.findings, **self._facts())

    def text(self) -> str:
        from .render import text

        return text(self)


def _refuse_bad_input(script, sets, verl_src, cann="") -> None:
    from .roce import parse

    if cann and not parse(cann):
        raise BadCheckInput(f"--cann {cann!r} is not a CANN version; pass the cluster's, e.g. --cann 8.5.0 or --cann 8.0.RC3")
    if not os.path.isfile(script):
        raise BadCheckInput(f"{script}: no such file; pass the path of a recipe script")
    if verl_src and not os.path.isdir(verl_src):
        raise BadCheckInput(f"--verl-src {verl_src} is not a directory; pass a verl source tree or verl-recipe checkout")
    bad = [item for item in sets if "=" not in item]
    if bad:
        raise BadCheckInput(f"--set {bad[0]!r} is not KEY=VALUE, e.g. --set trainer.nnodes=8")
    if importlib.util.find_spec("verl") is None:
        raise BadCheckInput("verl is not installed in this Python environment: install verl to check recipes")


def _layout_summary(cfg, use_ref, engine) -> dict:
    out = {"world_size": world_size(cfg)}
    for role in ["actor"] + (["ref"] if use_ref else []):
        lay = train_layout(cfg, role, engine)
        out[role] = {"strategy": lay.strategy, "tp": lay.tp, "pp": lay.pp, "cp": lay.cp, "ep": lay.ep,
                     "dp": lay.dp(out["world_size"])}
    ro = rollout_layout(cfg)
    out["rollout"] = {"name": ro.name, "tp": ro.tp, "dp": ro.dp, "ep": ro.ep, "replica": ro.replica,
                      "replicas": out["world_size"] // ro.replica if out["world_size"] % ro.replica == 0 else None}
    return out


_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


# Where an already-imported hub client keeps the offline switch it read from the environment at import:
# (module, attribute). huggingface_hub.constants.HF_HUB_OFFLINE is what its is_offline_mode() returns;
# transformers 4.x (4.57 here) copied it into transformers.utils.hub._is_offline_mode at its own import.
_OFFLINE_FLAGS = (("huggingface_hub.constants", "HF_HUB_OFFLINE"), ("transformers.utils.hub", "_is_offline_mode"))


@contextlib.contextmanager
def _offline():
    """Offline while checking: a hub id must not make verl's validation retry the network (~40 s
    here, a minute elsewhere). Both clients read the switch once, at import: in a process that
    imported them before calling run_check, the environment variables alone are too late, so their
    flags are set too. All restored afterwards: run_check is also called inside other programs."""
    saved = {k: os.environ.get(k) for k in _OFFLINE}
    for k in _OFFLINE:
        os.environ.setdefault(k, "1")
    flags = []
    offline = os.environ["HF_HUB_OFFLINE"].strip().upper() in ("1", "ON", "YES", "TRUE")  # a user's =0 is kept
    for module_name, attribute in _OFFLINE_FLAGS if offline else ():
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, attribute):
            flags.append((module, attribute, getattr(module, attribute)))
            setattr(module, attribute, True)
    try:
        yield
    finally:
        for module, attribute, value in flags:
            setattr(module, attribute, value)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check(script: str, sets=(), verl_src=None, device: str = profiles.DEFAULT, cann: str = "") -> Report:
    """The report on one recipe; bad input raises :class:`BadCheckInput`, no sandbox on this host `sandbox.Unavailable`."""
    _refuse_bad_input(script, sets, verl_src, cann)
    with _offline():
        return _run_check(script, sets, verl_src, device, cann)  # no sandbox here: sandbox.Unavailable, a BadInput


def run_check(script: str, sets=(), verl_src=None, device: str = profiles.DEFAULT, cann: str = "") -> dict:
    """The report as the JSON-ready dict ``check --json`` prints (for programs calling check)."""
    return check(script, sets, verl_src, device, cann).as_dict()


def _run_check(script, sets, verl_src, device, cann="") -> Report:
    profile = profiles.get(device)
    report = Report(recipe=script, device={"profile": profile.name, "title": profile.title, "per": profile.rank_word,
                                           "rank_gb": profile.rank_gb})
    env_overrides = {}
    if verl_src:
        env_overrides["VERL_SRC"] = str(verl_src)
    # without a tree the shipped DAPO recipes call verl's main_ppo and pick its reward keys themselves
    got = extract.extract(script, env_overrides)  # raises sandbox.Unavailable (bad input): nothing ran
    launch, found = got.launch, list(got.findings)
    report.skipped = got.skipped
    if launch is None:
        return _finish(report, found)
    launch.overrides.extend(sets)
    report.entry, report.config_name, report.overrides = launch.module, launch.config_name, list(launch.overrides)
    composed = compose.compose_launch(launch, verl_src=verl_src)
    report.config_source = composed.source
    script_only = rules.Context(None, None, False, profile=profile, launch_env=launch.env)
    findings = found + list(composed.findings) + rules.run(script_only, needs_config=False)
    cfg = composed.config
    version, has_auto, patch_active = _verl_features()
    report.verl_version = version
    if cfg is None:
        return _finish(report, findings)
    try:
        return _judge(report, cfg, launch, profile, findings, version, has_auto, patch_active, cann)
    except BadValue as exc:  # a size the rules need is not a number: the recipe's error, stated as one
        bad = finding("config", ERROR, (exc.key,), f"{exc}: the parallel, batch and memory rules need it",
                      f"set {exc.key} to {exc.kind}, or drop the override to keep verl's default")
        return _finish(report, findings + [bad])


def _judge(report, cfg, launch, profile, findings, version, has_auto, patch_active, cann="") -> Report:
    loop, loop_findings = trainer_path.findings(cfg, version)
    report.trainer = loop
    findings += [trainer_path.describe(loop)] + loop_findings
    ran, verl_found = verl_checks.run_verl_validation(cfg)
    remote = verl_checks.remote_models(cfg, verl_checks.uses_critic(cfg))
    for key, path in remote.items():
        where = ("is not on this machine" if os.path.isabs(os.path.expanduser(path))
                 else "is not on this machine: as a hub id, verl downloads it at start-up")
        findings.append(finding("model", INFO, (key,), f"{path} {where}; checked offline, so what needs its "
                                "files was skipped"))
    if remote:  # verl's validation needed a remote model's files: that is not the recipe's error
        verl_found = [f for f in verl_found if not any(p in f.message for p in remote.values())
                      and "offline" not in f.message.lower()]
    use_ref = verl_checks.uses_reference_policy(cfg)
    facts, why = model_facts.lookup(get(cfg, f"{ARR}.model.path"))
    if facts is None:
        findings.append(finding("model", INFO, (f"{ARR}.model.path",),
                                f"model facts unavailable ({why}): layer, head, expert and memory rules skipped"))
    else:
        report.model = {"name": facts.name, "source": facts.source, "layers": facts.num_layers,
                        "heads": facts.num_heads, "kv_heads": facts.num_kv_heads, "experts": facts.num_experts,
                        "params_b": round(facts.total_params() / 1e9, 2)}
    engine = trainer_path.engine_workers(cfg)
    report.layout = _layout_summary(cfg, use_ref, engine)
    ctx = rules.Context(cfg, facts, use_ref, has_auto_set_device=has_auto, device_patch_active=patch_active,
                        verl_raises_batched_tokens=verl_checks.raises_batched_tokens(), profile=profile,
                        launch_env=launch.env, engine_workers=engine, cann=cann)
    ours = rules.run(ctx, needs_config=True)
    # verl's assertions overlap ours (world size, batch divisibility); when ours already explain an
    # error, verl's text is kept in the report but not counted as a separate finding.
    report.verl_validation = {"ran": ran, "errors": [f.message for f in verl_found]}
    if not any(f.severity == ERROR for f in ours):
        findings.extend(verl_found)
    return _finish(report, findings + ours)


def _finish(report, findings) -> Report:
    report.findings = list(findings)
    return report
