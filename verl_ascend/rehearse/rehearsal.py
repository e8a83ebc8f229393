"""A recipe's real main_ppo loop, tiny, on this machine's CPU: what ``verl-ascend rehearse`` runs.

``run(options)`` reads the recipe in the sandbox of ``check``, scales it down (``plan/``), runs main_ppo
twice (``run/``: train to a checkpoint, then resume; the steps before and between), judges what the runs
proved (``verdict/``) and prints the ``logs`` report of the run. What runs inside verl's processes is
``loop/``; the processes themselves are the process layer's (``verl_ascend/proc``).
"""

import functools
import importlib.util
import os
import secrets
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from verl_ascend.core import findings, outfiles
from verl_ascend.core.settings import REHEARSE as ENV
from verl_ascend.proc import guard
from verl_ascend.proc.marks import describe
from verl_ascend.recipe.layout import node_shape
from verl_ascend.rehearse import supervised
from verl_ascend.rehearse.plan import data as data_mod
from verl_ascend.rehearse.plan import engine
from verl_ascend.rehearse.plan import overrides as plan_mod
from verl_ascend.rehearse.plan import reward as reward_mod
from verl_ascend.rehearse.plan.engine import CPU_RUN, ConvertFailed
from verl_ascend.rehearse.run import trainer as runner

TRAINER = "verl.trainer.main_ppo"
DAPO_TRAINER = "recipe.dapo.main_dapo"  # verl's DAPO recipe, run from a verl source tree (VERL_SRC)
RESPONSE_LENGTH = 16
N_RESP = 2


class RehearseError(findings.BadInput):
    """Bad input or an unsupported environment: exit 2 with this message."""


def support_problem() -> str:
    """Why the installed verl cannot be rehearsed ('' when it can): read its sources, import nothing."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return "verl is not installed in this Python environment (pip install verl)"
    root = Path(list(spec.submodule_search_locations)[0])
    needs = (("plugin/platform/platform_manager.py", "class PlatformRegistry", "platform registry (verl.plugin.platform)"),
             ("workers/rollout/replica.py", "class RolloutReplicaRegistry", "rollout replica registry"),
             ("workers/rollout/base.py", "_ROLLOUT_REGISTRY", "rollout class registry"))
    missing = []
    for rel, marker, what in needs:
        path = root / rel
        if not path.is_file() or marker not in path.read_text(errors="replace"):
            missing.append(what)
    if missing:
        return (f"the installed verl ({root}) has no {', no '.join(missing)}; a CPU rehearsal plugs into those "
                "(verl 0.9.x has them; 0.5.x and 0.6.x do not). Fix: run rehearse in a verl 0.9 environment")
    return ""


def needs_critic(cfg) -> bool:
    """verl's own rule (trainer/ppo/utils.py ``need_critic``): ``critic.enable`` when set, else a critic exactly
    when ``algorithm.adv_estimator`` is gae (verl's default)."""
    from omegaconf import OmegaConf

    enable = OmegaConf.select(cfg, "critic.enable", default=None)
    estimator = str(OmegaConf.select(cfg, "algorithm.adv_estimator", default="gae"))
    return enable is True or (enable is None and estimator == "gae")


def unsupported_roles(cfg) -> list:
    """The roles the composed config ``cfg`` runs that the rehearsal cannot scale: a Megatron critic, a reward
    model (``reward.reward_model.enable`` on 0.9, the legacy ``reward_model.enable``)."""
    from omegaconf import OmegaConf

    roles = []
    critic = OmegaConf.select(cfg, "critic.strategy", default="") if needs_critic(cfg) else ""
    if critic and critic not in ("fsdp", "fsdp2"):
        roles.append(f"a {'Megatron' if critic == 'megatron' else critic} critic (critic.strategy={critic}; an FSDP "
                     f"critic is rehearsed, algorithm.adv_estimator={OmegaConf.select(cfg, 'algorithm.adv_estimator')})")
    for key in ("reward.reward_model.enable", "reward_model.enable"):
        if OmegaConf.select(cfg, key, default=False) is True:
            roles.append(f"a reward model ({key}=True)")
            break
    return roles


def unsupported_engine(recipe, strategy: str, cfg) -> str:
    """The message for a recipe whose composed engine the rehearsal does not run (exit 2): never swapped for another."""
    from omegaconf import OmegaConf

    group = OmegaConf.select(cfg, "model_engine", default=None)
    return (f"{recipe} trains on verl's {strategy or 'unnamed'} engine (actor_rollout_ref.actor.strategy="
            f"{strategy or '(unset)'}" + (f", model_engine={group}" if group else "") + "); rehearse runs "
            f"{', '.join(plan_mod.REHEARSED_ENGINES)} as themselves and will not plan this recipe as another engine. "
            "Fix: rehearse it with an engine it runs (e.g. --override model_engine=dp for FSDP, or the "
            "ppo_megatron_trainer config), knowing the result says nothing of that engine; `verl-ascend check` "
            "reads the recipe as it is")


def child_env(launch_env: dict, megatron=None) -> dict:
    env = dict(os.environ)
    # The recipe's own verl-ascend switches travel (they change the plugin's behaviour); its NPU settings do not.
    env.update({k: v for k, v in (launch_env or {}).items() if k.startswith("VERL_ASCEND_") and k != ENV})
    env.setdefault("VERL_ASCEND_ROLLOUT_ORDER", "tiled")  # what A2 runs by default
    env.update({ENV: "1", "VERL_PLATFORM": "cpu", "OMP_NUM_THREADS": "1",
                # verl picks its engine class by device name: the CUDA one (registered for "cuda"), or on an
                # A2 recipe with MindSpeed importable, verl's MindspeedEngine (registered for "npu")
                "VERL_ENGINE_DEVICE": "npu" if megatron is not None and megatron.mindspeed else "cuda",
                **CPU_RUN,
                # inductor would compile verl's entropy helper (torch.compile) for ~40 CPU-s in each worker
                "TORCHDYNAMO_DISABLE": "1",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "RAY_DEDUP_LOGS": "0", "RAY_USAGE_STATS_ENABLED": "0", "VERL_ASCEND": "1",
                # Ray starts idle Python workers ahead of need (one per logical CPU it is told of); on a
                # 2-core host they cost a few CPU-seconds each and verl's actors start their own anyway
                "RAY_enable_worker_prestart": "0", "RAY_prestart_worker_first_driver": "0"})
    # Ray (2.60 here) turns token authentication on for a local cluster and, finding no token, writes one to the
    # user's ~/.ray/auth_token (shared by every cluster of that user; two first starts at once race on it).
    # The run's own token, in its environment only, leaves the home folder alone; a user's own token is kept.
    if not env.get("RAY_AUTH_TOKEN") and not env.get("RAY_AUTH_TOKEN_PATH"):
        env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    return env


def _print_logs_table(logs, out_dir: Path) -> int:
    """The `verl-ascend logs` report of the run's console logs (table, CSV, plot), printed and kept."""
    import contextlib
    import io

    from verl_ascend.logs import report as logs_report

    table = out_dir / "logs_table.txt"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            code = logs_report.run([str(p) for p in logs], csv_path=str(out_dir / "logs.csv"), plot=str(out_dir / "logs.png"))
        except logs_report.BadInput as exc:
            print(f"verl-ascend logs: {exc}", file=sys.stderr)
            code = 2
    table.write_text(buf.getvalue())
    print(buf.getvalue().rstrip())
    return code


def _checkpoints(ckpt_dir: Path) -> list:
    return sorted(p.name for p in ckpt_dir.glob("global_step_*") if p.is_dir())


def _recipe_reward(overrides, cwd: str) -> tuple:
    """(path, name) of the recipe's own reward function ('' when it uses verl's default)."""
    path = plan_mod.value_of(overrides, "reward.custom_reward_function.path", "") or ""
    path = "" if str(path).strip().lower() in ("", "null", "none") else str(path).strip().strip("'\"")
    if path and not os.path.isabs(path):
        path = os.path.join(cwd or os.getcwd(), path)
    if path and not os.path.isfile(path):
        raise RehearseError(f"reward.custom_reward_function.path={path} does not exist here. Fix: pass the recipe's "
                            "reward file's location (--env for the variable it is read from, or --override)")
    name = plan_mod.value_of(overrides, "reward.custom_reward_function.name", "compute_score") or "compute_score"
    return path, name


def run(options) -> int:
    """The rehearsal ``options`` (the parsed rehearse flags) ask for: 0 ok, 1 the run failed (said on stderr).

    Bad input or an unsupported verl raises :class:`RehearseError`.
    """
    problem = support_problem()
    if problem:
        raise RehearseError(problem)
    recipe = Path(options.recipe)
    if not recipe.is_file():
        raise RehearseError(f"recipe {options.recipe} does not exist. Fix: pass the path of a launch script such as "
                            "recipes/grpo_qwen2_5_7b_a2.sh")
    bad_env = [a for a in options.env if "=" not in a or not a.split("=", 1)[0]]
    if bad_env:
        raise RehearseError(f"--env {bad_env[0]!r} is not NAME=VALUE. Fix: e.g. --env MODEL_PATH=/models/Qwen2.5-7B")
    if supervised.problem(options):
        raise RehearseError(supervised.problem(options))
    if options.nnodes > 1 or options.no_sync or options.fault in supervised.NODE_FAULTS:
        if options.nnodes < 2:
            raise RehearseError("--no-sync and --fault worker-node act on a multi-node rehearsal. Fix: add --nnodes 2")
        if not runner.namespace_prefix():
            raise RehearseError("--nnodes needs Linux namespaces (util-linux unshare: a PID namespace for the run, a "
                                "mount namespace per node), which this host refuses (Docker without CAP_SYS_ADMIN, "
                                "kernel.unprivileged_userns_clone=0). Fix: run it on a host or container that allows "
                                "them, or rehearse one node (drop --nnodes)")
    from verl_ascend.recipe import extract as extract_mod

    started = time.time()
    print(f"rehearse: reading {recipe} (sandboxed, nothing of it runs here) ...", flush=True)
    # no sandbox on this host: sandbox.Unavailable, a BadInput (cli.main says it, exit 2)
    found = extract_mod.extract(str(recipe), dict(a.split("=", 1) for a in options.env), cwd=os.getcwd())
    launch = found.launch
    if launch is None:
        why = "; ".join(f.message for f in found.findings) or "no trainer call found"
        raise RehearseError(f"{recipe}: {why}")
    if launch.module == DAPO_TRAINER:
        if not (Path(launch.cwd) / "recipe" / "dapo" / "main_dapo.py").is_file():
            raise RehearseError(f"{recipe} launches {DAPO_TRAINER} from {launch.cwd}, which holds no "
                                "recipe/dapo/main_dapo.py. Fix: --env VERL_SRC=<a verl checkout with its recipe "
                                "submodule>, or on verl >= 0.9 leave VERL_SRC unset: the shipped DAPO recipes then "
                                f"call {TRAINER}")
    elif launch.module != TRAINER:
        raise RehearseError(f"{recipe} launches {launch.module}; rehearse runs {TRAINER} recipes, and {DAPO_TRAINER} "
                            "from a verl source tree")
    try:  # the config verl composes from the recipe: what decides the engine, the roles, the bridge
        cfg = engine.compose(launch, list(launch.overrides) + list(options.overrides))
        if plan_mod.engine_of(cfg) == "megatron":
            engine.check_bridge(cfg)
    except engine.EngineError as exc:
        raise RehearseError(str(exc)) from None
    strategy = plan_mod.engine_of(cfg)
    if strategy not in plan_mod.REHEARSED_ENGINES:
        raise RehearseError(unsupported_engine(recipe, strategy, cfg))
    roles = unsupported_roles(cfg)
    if roles:
        raise RehearseError(f"{recipe} runs {' and '.join(roles)}; rehearse scales the actor, its rollout, the "
                            "reference model and an FSDP critic (that role would keep its cluster model path and "
                            "sizes). Fix: rehearse the recipe with that role off (e.g. --override critic.enable=False "
                            "--override algorithm.adv_estimator=grpo, or --override reward.reward_model.enable=False), "
                            "or check it with `verl-ascend check`, which reads every role")
    out = Path(options.out or f"rehearse-{recipe.stem}").resolve()
    ckpt_dir = out / "checkpoints"
    if ckpt_dir.exists() and any(ckpt_dir.iterdir()):
        raise RehearseError(f"--out {out} already holds checkpoints (a rehearsal would resume from them). "
                            "Fix: pass another --out or remove that folder")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="va-rh-"))  # short: Ray's socket paths must stay < 108 bytes
    options.keep_model = options.keep_model or options.plan  # a plan's commands.txt names the model: it stays
    model_dir = out / "model" if options.keep_model else work / "model"
    try:
        # a stop signal raises guard.Stopped here: whatever runs (the converter, a main_ppo, a node's ckpt check) is
        # ended on the way out, each by its own run's handle (run/trainer.py)
        with guard.stop_signals_raise():
            return _rehearse(options, recipe, launch, out, ckpt_dir, work, model_dir, started, cfg)
    except guard.Stopped as stop:
        # a look at every process this rehearsal started, by the mark they all carry, before saying what is left
        left = sorted(set(getattr(stop, "survivors", [])) | set(runner.left_running()))
        if left:
            print(f"verl-ascend rehearse: {stop}; processes of the run outlived its ending: {describe(left)}",
                  file=sys.stderr)
            return 1
        print(f"verl-ascend rehearse: {stop}; the run was ended (looked: nothing of it is left running)", file=sys.stderr)
        return 128 + stop.signum
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _rehearse(options, recipe, launch, out, ckpt_dir, work, model_dir, started, cfg) -> int:
    from verl_ascend.rehearse.plan import assets

    nproc, steps = options.nproc, options.steps
    nnodes = options.nnodes
    ranks = nproc * nnodes  # nproc is ranks per node
    batch = 2 * ranks
    overrides = list(launch.overrides) + list(options.overrides)
    filtered = plan_mod.is_true(overrides, "algorithm.filter_groups.enable")
    # DAPO's filter evicts about 3 of 4 groups here (see reward.py) and refills them from the data
    train, val, data_note = data_mod.prepare_data(overrides, out / "data", batch * (steps + 1) * (8 if filtered else 1), 4)
    model_path = plan_mod.value_of(overrides, "actor_rollout_ref.model.path", "")
    layout, mindspeed = None, ""
    try:
        if plan_mod.engine_of(cfg) == "megatron":  # the engine is the one verl composes from the recipe
            mindspeed = engine.mindspeed_here()
            layout = engine.megatron_layout(cfg, overrides, ranks, assets.source_config(model_path)[0], mindspeed)
        print("rehearse: building the tiny model and tokenizer ...", flush=True)
        built = assets.build(model_path, assets.prompt_texts([train, val]), model_dir,
                             **({"layers": layout.layers} if layout else {}))
    except (assets.AssetError, engine.EngineError) as exc:
        raise RehearseError(str(exc)) from None
    plen = data_mod.prompt_length(model_dir, train, plan_mod.value_of(overrides, "data.prompt_key", "prompt"))
    ray_tmp = str(work / "ray")
    reward_file, reward_note = reward_mod.write(out, *_recipe_reward(overrides, launch.cwd), filtered=filtered)
    megatron = None
    if layout is not None:
        try:
            mcore_dir = out / "model_mcore" if options.keep_model else work / "mcore"
            from verl_ascend.rehearse.run import steps as steps_mod

            megatron = engine._megatron(cfg, overrides, layout, model_dir, mcore_dir, given=options.overrides,
                                        mindspeed=mindspeed, convert=steps_mod.convert_tiny_model)
        except ConvertFailed as exc:
            print(f"verl-ascend rehearse: {exc}", file=sys.stderr)
            return 1
    # --override items are the recipe's last overrides, as its "$@" would be: they go through the plan like the
    # recipe's own (a model path or size given there is replaced, and listed), but for initial weights the
    # rehearsal uses as given (see _megatron)
    given_weights = []
    if megatron and megatron.weights_given:
        given_weights = [item for item in options.overrides
                         if plan_mod.split(item)[1].endswith(".megatron.dist_checkpointing_path")]
    recipe_and_user = list(launch.overrides) + [item for item in options.overrides if item not in given_weights]
    the_plan = plan_mod.build(launch.config_name, recipe_and_user, model_dir=str(model_dir), train_file=train,
                              val_file=val, nproc=nproc, steps=steps, prompt_length=plen,
                              response_length=RESPONSE_LENGTH, ckpt_dir=str(ckpt_dir), ray_tmp=ray_tmp,
                              n_resp=N_RESP, batch=batch, reward_file=reward_file, megatron=megatron,
                              critic=needs_critic(cfg), nnodes=nnodes, recipe_world=node_shape(cfg),
                              lr=getattr(options, "lr", None) or plan_mod.REHEARSAL_LR)
    use_v1 = plan_mod.value_of(overrides, "trainer.use_v1", "True (verl 0.9 default)")
    changes = [f"model: {built['architecture']} ({built['model_type']}) from {built['source']} -> "
               f"{built['layers']} layers, hidden {built['hidden']}, vocab {built['vocab']}, {built['params']:,} "
               f"parameters, random weights{engine.moe_note(built)}; tokenizer: byte-level BPE trained "
               "here (offline)", data_note, reward_note] + the_plan.changes
    kept = [f"kept: {item}" for item in the_plan.kept]
    extra = [f"--override (read as the recipe's last overrides): {item}" for item in options.overrides]
    report = [f"rehearsal of {recipe} ({launch.module}, trainer.use_v1={use_v1})", "scaled down for CPU:"]
    report += [f"  - {c}" for c in changes] + [f"  {k}" for k in kept + extra]
    tmp_report = out / "changes.txt.tmp"
    tmp_report.write_text("\n".join(report) + "\n")
    tmp_report.replace(out / "changes.txt")
    print("\n".join(report), flush=True)

    argv = [sys.executable, "-m", launch.module, f"--config-name={the_plan.config_name}"]
    # main_dapo must start in its verl tree (its config names its parent relative to the working directory)
    run_cwd = launch.cwd if launch.module == DAPO_TRAINER else str(out)
    if launch.config_path not in ("config", "") and os.path.isabs(launch.config_path):
        argv.append(f"--config-path={launch.config_path}")
    base = the_plan.overrides + given_weights
    env = child_env(launch.env, megatron)
    cluster = None
    if nnodes > 1:
        from verl_ascend.rehearse.run import multinode

        cluster = multinode.prepare(nnodes, nproc, out, ckpt_dir, ray_tmp,
                                    fault="" if options.supervise else options.fault or "")
        argv = cluster.prefix() + argv
    logs, said, phases = [], [], [("train", steps, base), ("resume", steps + 1,
                                                  base + [f"trainer.total_training_steps={steps + 1}"])]
    # each phase's command, to run it again by hand (without the PID namespace)
    own = [f"{k}={v}" for k, v in sorted(env.items()) if os.environ.get(k) != v and k not in ("RAY_AUTH_TOKEN", runner.MARK)]
    with outfiles.atomic(str(out / "commands.txt")) as tmp:
        Path(tmp).write_text("".join(f"# {label}: cd {shlex.quote(run_cwd)} && \\\n"
                                     f"{shlex.join(['env'] + own + argv + overrides_run)}\n" for label, _, overrides_run in phases))
    trainer = launch.module.rsplit(".", 1)[-1]  # main_ppo, or main_dapo from a verl tree
    if options.plan:
        print(f"rehearse: plan only: {out / 'changes.txt'}, {out / 'commands.txt'} (the tiny model in {model_dir}); "
              f"{trainer} not run", flush=True)
        return 0
    if options.supervise:  # the training under the supervisor, a fault planted: its relaunch is the resume
        return supervised.run(options, argv + base + [f"hydra.run.dir={out / 'hydra'}"], env, run_cwd, out, ckpt_dir,
                              cluster, _print_logs_table)
    for label, last_step, overrides_run in phases:
        log = out / ("console.log" if label == "train" else "console_resume.log")
        where = f"{nnodes} Ray nodes x {nproc}" if nnodes > 1 else str(nproc)
        print(f"rehearse: {label}: {trainer} to step {last_step} on {where} CPU rank(s); log {log}; Ray in {ray_tmp}",
              flush=True)
        spaces, left = [], []
        code, seen, error = runner.run(argv + overrides_run + [f"hydra.run.dir={out / 'hydra'}"], env, run_cwd, log,
                                       options.timeout, label, said=said, namespace=spaces, left=left)
        logs.append(log)
        if spaces and spaces[0] and not left:  # left: what a look at /proc after its end found still alive
            print(f"rehearse: {label}: {trainer} ran in PID namespace {spaces[0]} (its processes carry "
                  f"{runner.MARK}={spaces[1]}); every process in it ended with it", flush=True)
        if code != 0 or error:
            print(f"verl-ascend rehearse: {trainer} ({label}) failed, exit {code}: {error or 'see ' + str(log)}",
                  file=sys.stderr)
            return 1
        if label == "train" and (not seen or max(seen) != last_step):  # the resume's steps: the verdict's
            print(f"verl-ascend rehearse: {trainer} ({label}) exited 0 but logged steps {seen or 'none'} "
                  f"(expected up to {last_step}); see {log}", file=sys.stderr)
            return 1
        if label == "train" and cluster is not None:
            unsynced = None if not options.no_sync else functools.partial(
                _unsynced_resume, argv + phases[1][2] + [f"hydra.run.dir={out / 'hydra'}"], env, run_cwd, out,
                options.timeout, logs[0], steps, trainer)
            problem = multinode.between_runs(cluster, ckpt_dir, out, unsynced)
            if problem:
                print(f"verl-ascend rehearse: {problem}", file=sys.stderr)
                return 1
    ckpts = _checkpoints(cluster.node_copy(0, ckpt_dir) if cluster else ckpt_dir)
    print(f"rehearse: checkpoints in {ckpt_dir}: {', '.join(ckpts) or 'none'}")
    if f"global_step_{steps}" not in ckpts:
        print(f"verl-ascend rehearse: no checkpoint global_step_{steps} in {ckpt_dir}", file=sys.stderr)
        return 1
    _print_logs_table(logs, out)
    from verl_ascend.rehearse.verdict import checks as verdict
    from verl_ascend.rehearse.verdict import nodes as verdict_nodes

    checks = verdict.judge(logs[0], logs[1], steps)
    print(verdict.summary(checks))
    print("the plugin inside the loop, as its processes said it (console*.log, lines '" + runner.SAID + "'):")
    print("\n".join(f"  {line}" for line in said) if said else
          "  nothing: no process of the loop reported (is verl-ascend installed in main_ppo's environment?)")
    bad = verdict.failed(checks)
    if cluster is not None:
        from verl_ascend.rehearse.loop.report import settings_of

        crossed, lines = verdict_nodes.settings_crossed(said, settings_of(env), cluster.hosts)
        print("what reached each node, as its processes said it:\n" + "\n".join(f"  {line}" for line in lines))
        if not crossed:
            bad.append(verdict.Check("settings on every node", False, "a node's processes lack the driver's settings"))
    if bad:
        print(f"verl-ascend rehearse: both runs exited 0, but the loop failed {len(bad)} check(s): "
              + "; ".join(f"{c.name} ({c.figure})" for c in bad), file=sys.stderr)
        for line in verdict.advice(checks):
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"rehearse: ok in {time.time() - started:.0f} s: {steps} step(s), checkpoint, resumed step {steps + 1}; "
          f"outputs in {out} (changes.txt, console*.log, checkpoints/, logs_table.txt, logs.png, logs.csv)")
    return 0


def _unsynced_resume(argv, env, cwd, out, timeout, train_log, steps, trainer) -> tuple:
    """``--no-sync``: the resume's own command on the nodes' disks as the save left them; (failed, how)."""
    from verl_ascend.rehearse.verdict import checks as verdict

    log = out / "console_unsynced.log"
    print(f"rehearse: resume without ckpt sync: {trainer} to step {steps + 1}; log {log}", flush=True)
    code, _, error = runner.run(argv, env, cwd, log, timeout, "unsynced", said=[], namespace=[], left=[])
    named = f" (`verl-ascend diagnose {train_log} {log}` names the cause and the fix)"
    if code != 0:
        return True, f"{trainer} exit {code}: {error or 'see ' + str(log)}{named}"
    loaded = verdict.judge(train_log, log, steps)[0]  # "resume loaded the checkpoint"
    return not loaded.ok, loaded.figure + (named if not loaded.ok else "")
