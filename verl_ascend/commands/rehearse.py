"""``verl-ascend rehearse RECIPE.sh``: the recipe's real main_ppo loop, tiny, on this machine's CPU."""

from verl_ascend.commands._args import learning_rate, positive_int
from verl_ascend.rehearse import rehearsal


def run(args) -> int:
    return rehearsal.run(args)  # its RehearseError is bad input: cli.main says it and exits 2


def register(sub) -> None:
    p = sub.add_parser(
        "rehearse",
        help="run a recipe's real main_ppo training loop, tiny, on this machine's CPU",
        description="Reads RECIPE.sh the way `check` does (in a sandbox; none of its commands run here), then runs "
        "its trainer (verl's main_ppo; DAPO's main_dapo from a verl tree given with --env VERL_SRC=...) for real "
        "on CPU: driver, Ray, the recipe's engine over gloo (verl's Megatron engine, its TP/PP scaled to the "
        "ranks and its dist-checkpoint initial weights converted from the tiny model; or FSDP2), rollout, "
        "reward, update, checkpoint, and a resume from that checkpoint. Only what a CPU cannot do is scaled down "
        "(model -> tiny random model of the same family, rollout -> transformers generate, sizes, devices, "
        "data -> the recipe's parquet truncated or the bundled gsm8k sample; the recipe's reward gets a small "
        "term that varies inside each group so GRPO/DAPO have advantages); every change is listed in "
        "DIR/changes.txt. Algorithm, advantage estimator, KL, reward function and trainer path stay the "
        "recipe's. Needs verl 0.9.x. Exit 0 ok, 1 the run failed (the error is named), 2 bad input or an "
        "unsupported verl.",
    )
    p.add_argument("recipe", metavar="RECIPE.sh", help="launch script calling python -m verl.trainer.main_ppo (or recipe.dapo.main_dapo)")
    p.add_argument("--override", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Hydra override appended to the recipe's, as its \"$@\" would be; repeatable "
                   "(e.g. --override reward.custom_reward_function.path=my_reward.py)")
    p.add_argument("--steps", type=positive_int, default=2, help="training steps before the checkpoint (default 2)")
    p.add_argument("--lr", type=learning_rate, metavar="RATE",
                   help="the actor's learning rate (default 1e-3, the rehearsal's own: a tiny random model needs a large one "
                   "to show a learning signal in a few steps; the recipe's and an --override's optim.lr are replaced either way)")
    p.add_argument("--nproc", type=int, choices=(1, 2, 4), default=2,
                   help="CPU training ranks per node (default 2). A Megatron recipe keeps as many of its parallel kinds above 1 as the "
                   "ranks hold, TP first on a tie (2 ranks: TP2; 4 ranks: TP2 PP2 from the 32B recipe's TP8 PP2, TP2 PP2 "
                   "EP2 from the 235B recipe's TP4 PP8 EP4)")
    p.add_argument("--nnodes", type=int, choices=(1, 2, 3, 4), default=1,
                   help="Ray nodes on this machine (default 1), --nproc ranks each, as the recipe's cluster runs them "
                   "(trainer.nnodes): the head on this machine's address, worker node k on 127.A.B.(k+1) (A.B drawn "
                   "per rehearsal), each its own disk for the checkpoint folder "
                   "and Ray's (a mount namespace), and only the machine's environment, so the driver's VERL_ASCEND* "
                   "settings must travel in the job's runtime env. Between the runs, what a cluster without shared "
                   "storage needs: the files on each node listed, `ckpt check` on each node, `ckpt sync` between them, "
                   "`ckpt check` again; the resume reads the synced checkpoint (docs/rehearse.md, multi-node)")
    p.add_argument("--no-sync", action="store_true",
                   help="with --nnodes: first resume without `ckpt sync`, as a cluster without shared storage would "
                   "(it fails the way it does there; its log is OUT/console_unsynced.log, and `verl-ascend diagnose "
                   "OUT/console.log OUT/console_unsynced.log` names it), then put each node's checkpoint back as the "
                   "save left it and go on as without this flag: sync, check, resume")
    p.add_argument("--fault", choices=("worker-node", "kill-worker", "hang-rank", "bad-override", "crash-loop",
                                        "damaged-ckpt"),
                   help="worker-node, with --nnodes: the last worker node loses power at the loop's first rollout (every "
                   "process of it killed); alone, rehearse exits 1 naming the node and its dead actors. With --supervise, "
                   "the fault the supervisor meets (docs/supervise.md): kill-worker, hang-rank, bad-override, "
                   "crash-loop; with --nnodes 2 also worker-node and damaged-ckpt")
    p.add_argument("--supervise", action="store_true",
                   help="run the training under `verl-ascend supervise` with the --fault planted in its first attempt "
                   "(every attempt for crash-loop); OUT/supervise holds its report.json; exit 0 when the supervisor "
                   "did what the fault asks (recover and finish, or stop) and the resumed loop passes its checks")
    p.add_argument("--out", metavar="DIR", help="output folder (default ./rehearse-<recipe name>)")
    p.add_argument("--keep-model", action="store_true", help="keep the tiny model in DIR/model (and, for a recipe loading a dist checkpoint, its "
                   "conversion in DIR/model_mcore)")
    p.add_argument("--plan", action="store_true",
                   help="stop before the trainer runs: build the tiny model (and its dist-checkpoint conversion when the "
                   "recipe loads one), write DIR/changes.txt and DIR/commands.txt (each phase's command, to run by hand) and "
                   "exit 0; the model stays in DIR as with --keep-model")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="environment for reading the recipe (e.g. --env MODEL_PATH=/models/Qwen2.5-7B-Instruct)")
    p.add_argument("--timeout", type=positive_int, default=900, metavar="S",
                   help="seconds per main_ppo run before it is ended (default 900)")
    p.set_defaults(func=run)
