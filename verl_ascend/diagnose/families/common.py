"""The failures any verl run meets on any hardware: configuration (Hydra / OmegaConf), data and model paths,
thread limits, state dicts that do not fit the model, sizes that do not divide, collective watchdogs of NCCL
and Gloo, and Ray's own verdict on a worker that died. Each was written from the public threads it cites, whose
log lines are kept verbatim under tests/fixtures/diagnose/public/verbatim/."""

from .model import GH, Family, Rule

FAMILIES = {f.id: f for f in (
    Family(
        "config_invalid", 11, "The configuration did not compose (Hydra / OmegaConf)",
        "A command-line override names a key the config does not have (`Key '...' is not in struct`, `Could not "
        "override`), leaves a mandatory value unset (`Missing mandatory value`) or gives a value of the wrong type: "
        "a misspelt key, a key of another verl version, or a new key written without `+`. Or Hydra's override "
        "grammar cannot read an argument at all (`LexerNoViableAltException`, `Error parsing override`; the caret "
        "marks the character): a value with characters the grammar reserves left unquoted (`,` `:` `[` `]` `=` "
        "spaces), a Windows line ending (`\\r`) or a stray character such as `#` at the end of a script's line.",
        "Fix the key named in the message: check its spelling against the installed verl's config "
        "(`verl-ascend check RECIPE.sh` composes the recipe's config before any NPU is used and names the key); a "
        "key verl does not define is added as `+key=value`; a key an older verl had may have moved or gone. For a "
        "parse error, look at the character under the caret: quote the value for Hydra inside the shell's quotes "
        "(`key='\"a,b\"'`), strip Windows line endings from the script (`sed -i 's/\\r$//' RECIPE.sh`) and remove "
        "what ended up glued to the argument.",
        (GH + "hydra-ecosystem/hydra/issues/1912", GH + "verl-project/verl/issues/4262",
         GH + "SwanHubX/SwanLab-Docs/pull/170", GH + "zju3dv/OnePose_Plus_Plus/issues/51", GH + "ise-uiuc/nnsmith/issues/83",
         GH + "hydra-ecosystem/hydra/issues/947", GH + "IDEA-Research/detrex/issues/309",
         GH + "hydra-ecosystem/hydra/issues/902", GH + "facebookresearch/PointContrast/issues/16"),
    ),
    Family(
        "data_path_missing", 13, "A data file of the run does not exist",
        "The dataset reader could not open a data file (`data.train_files` / `data.val_files`): the path is wrong on "
        "this node, the preprocessing step that writes the parquet was never run, or the file lives on a disk the "
        "other nodes do not mount.",
        "Create the files first (verl's examples: `python3 examples/data_preprocess/gsm8k.py --local_save_dir "
        "~/data/gsm8k`), then point `data.train_files=` and `data.val_files=` at them with absolute paths that exist "
        "on every node (`ls -l <path>` there).",
        (GH + "JingyangYi/ShorterBetter/issues/1", GH + "verl-project/verl/pull/1763"),
    ),
    Family(
        "thread_limit", 14, "The process could not start another thread",
        "Creating a thread failed (`can't start new thread`, `pthread_create failed`, `Resource temporarily unavailable "
        "[system:11]`): the per-user process/thread limit (`ulimit -u`) or the container's pids limit was reached; "
        "Ray workers, gRPC, dataloader workers and OpenMP pools each start threads.",
        "Raise the limit in the shell that runs `ray start` on every node: `ulimit -u 65535` (hard limit in "
        "/etc/security/limits.conf: `* - nproc 65535`; in docker `--pids-limit`), then restart Ray; use fewer "
        "threads per process (`export OMP_NUM_THREADS=8`, fewer `data.dataloader_num_workers`).",
        (GH + "verl-project/verl/issues/719", GH + "verl-project/verl/issues/472"),
    ),
    Family(
        "model_path_invalid", 18, "The model path is neither a local folder nor a hub id",
        "transformers / huggingface_hub were given a model path that is not an existing local folder, so they "
        "treated it as a hub repository id and rejected it (`HFValidationError: Repo id must be in the form ...`): "
        "a path with `~` or `$VAR` that the shell never expanded, a typo, or a folder missing on this node.",
        "Give `actor_rollout_ref.model.path` (and `critic.model.path`, `reward_model.model.path`) as an absolute "
        "path that exists on every node and holds config.json (`ls <path>/config.json`); write `$HOME/...`, not "
        "`~/...` inside quotes.",
        (GH + "PRIME-RL/TTRL/issues/25", GH + "verl-project/verl/issues/3048", GH + "vllm-project/vllm-omni/pull/2125",
         GH + "databrickslabs/dolly/issues/167"),
    ),
    Family(
        "state_dict_mismatch", 27, "A checkpoint does not fit the model built to load it",
        "`load_state_dict` found tensors whose shapes differ from the model's (`size mismatch for ...: copying a param "
        "with shape ... from checkpoint, the shape in current model is ...`) or keys one side lacks: the checkpoint "
        "was saved from another model size / config, or at another parallel layout than the one loading it.",
        "Load the checkpoint with the model config it was saved with (same `config.json`: hidden size, heads, vocab), "
        "and a Megatron / DCP checkpoint at the layout it was saved at or through a converter; `verl-ascend ckpt "
        "check <dir>` reads its shapes and layout; the shapes in the message name the dimension that differs.",
        (GH + "Deci-AI/super-gradients/issues/1476", GH + "sail-sg/volo/issues/38",
         GH + "nikhilbarhate99/PPO-PyTorch/issues/32"),
    ),
    Family(
        "size_not_divisible", 28, "A model size does not divide by a parallel size",
        "vLLM or Megatron shards heads, experts or layers across ranks and refuses a size that does not divide "
        "(`Total number of attention heads (52) must be divisible by tensor parallel size (8)`): the rollout or "
        "training parallel sizes do not fit this model.",
        "Choose sizes that divide the model's counts: `actor_rollout_ref.rollout.tensor_model_parallel_size` a "
        "divisor of the attention heads, Megatron TP of heads and KV heads, EP of the experts, PP of the layers; "
        "`verl-ascend check RECIPE.sh` compares every one with the model's config before the run.",
        (GH + "vllm-project/vllm/issues/2652", GH + "vllm-project/vllm/pull/52535",
         GH + "NVIDIA-BioNeMo/bionemo-recipes/issues/784"),
    ),
    Family(
        "ray_unschedulable", 29, "Ray cannot place the run's actors (resources or placement group)",
        "Ray keeps an actor or a placement group waiting because no node offers what it asks for (`cannot be "
        "scheduled right now`, vLLM's `Waiting for creating a placement group of specs`): the cluster has fewer "
        "devices / CPUs than the layout needs, a node has not joined, earlier actors still hold the resources, or "
        "the request names a resource no node registered.",
        "`ray status` on the head: compare the resources listed with what the run asks for (trainer.nnodes x "
        "trainer.n_gpus_per_node devices; on Ascend the `NPU` resource); start the missing nodes (`ray start "
        "--address=<head>:6379 --resources='{\"NPU\": 8}'`), stop leftover jobs (`ray list actors`), or lower "
        "the requested sizes.",
        (GH + "ray-project/ray/issues/21920", GH + "vllm-project/aibrix/issues/927"),
    ),
    Family(
        "rendezvous_unreachable", 32, "torch.distributed could not reach the rendezvous (MASTER_ADDR:MASTER_PORT)",
        "A rank could not connect to the TCPStore that rank 0 serves (`The client socket has timed out after Nms while "
        "trying to connect to (host, port)`, `Connection refused`): the address is not rank 0's, it is not reachable "
        "from this node (another network, a firewall), or rank 0 died or had not started it yet.",
        "`MASTER_ADDR` / `MASTER_PORT` (torchrun `--master_addr`) must be rank 0's node address on a network every "
        "node reaches: test with `nc -zv <addr> <port>` from another node; read rank 0's own log for an earlier "
        "failure; on Ray every node must be reachable on the address Ray registered (`ray status`; `ray start "
        "--node-ip-address=<ip>`).",
        (GH + "nvidia-cosmos/cosmos-rl/issues/681", GH + "vllm-project/vllm/issues/19670",
         GH + "hiyouga/LlamaFactory/issues/3698", GH + "verl-project/verl/issues/849"),
    ),
    Family(
        "collective_timeout", 71, "A collective (NCCL / Gloo) timed out in its watchdog",
        "One rank did not enter the collective the others waited in (`Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=N, OpType=...)`) within the process-group timeout: it was still busy (long rollout, "
        "checkpoint save, data loading), had died, or ran a different sequence of collectives.",
        "Find the rank that is missing from the reports or reports a lower `SeqNum` (the notes list the collectives "
        "and sequence numbers): its own log holds the cause. If it was only slow, raise the timeout: "
        "`actor_rollout_ref.nccl_timeout=7200` (600 s by default in verl); on Ascend the HCCL equivalents are "
        "`HCCL_EXEC_TIMEOUT` and the same verl key.",
        (GH + "hiyouga/LlamaFactory/issues/6269", GH + "XPixelGroup/BasicSR/issues/737",
         GH + "huggingface/diffusers/issues/12422", GH + "verl-project/verl/issues/2106",
         GH + "hiyouga/LlamaFactory/issues/7396", GH + "OFA-Sys/OFA/issues/271", GH + "pytorch/pytorch/issues/118369",
         GH + "msr-fiddle/pipedream/issues/39", GH + "Peterande/D-FINE/issues/75", GH + "hiyouga/LlamaFactory/issues/8261",
         GH + "huggingface/open-r1/issues/620"),
    ),
    Family(
        "ray_actor_died", 85, "Ray: an actor's worker process died",
        "Ray lost the process behind an actor (`The actor is dead because its worker process has died. Worker exit "
        "type: SYSTEM_ERROR ...`): it was killed (the kernel's OOM killer sends SIGKILL, `ray stop --force`) or "
        "crashed (SIGSEGV, an abort in native code). Ray's message is the verdict, not the cause.",
        "Look for that worker's last lines before the death (its pid in the driver log, or "
        "/tmp/ray/session_latest/logs/worker-*-<pid>.err on its node); for SIGKILL check the kernel: "
        "`dmesg -T | grep -i -E 'killed process|out of memory'` on that node, then give it more host memory or "
        "need less (offload off, fewer dataloader workers).",
        (GH + "verl-project/verl/issues/4921", GH + "verl-project/verl/issues/472", GH + "verl-project/verl/issues/2047",
         GH + "AgentR1/Agent-R1/issues/33"),
    ),
)}

# a traceback's source line that only quotes the message (`assert h % tp == 0, "... must be divisible by ..."`)
_SOURCE = r"^\W*(?:\(\w+ pid=\d+[^)]*\)\s*)?(?:\[rank\d+\]:\s*)?\s*(?:assert|raise|f?\"|f?')"

RULES = (
    # vLLM-Ascend's own wording of an AI Core / vector core failure caught at stream synchronisation (families/core.py)
    Rule("npu_runtime", ("ACL stream synchronize failed",), r"ACL stream synchronize failed, error code:? ?5070[13]\d\b"),
    Rule("config_invalid", ("Could not override", "is not in struct", "Missing mandatory value", "omegaconf.errors",
                            "LexerNoViableAltException", "Error parsing override", "OverrideParseException"),
         r"Could not override '[^']+'|[Kk]ey '[^']+' is not in struct|Missing mandatory value|omegaconf\.errors\.\w+|"
         r"LexerNoViableAltException: \S|Error parsing override '|hydra\.errors\.OverrideParseException"),
    Rule("data_path_missing", ("FileNotFoundError", "No such file", "Unable to find"),
         r"(?:FileNotFoundError|No such file or directory|Unable to find)\b.*\.(?:parquet|jsonl?|arrow|csv)\b",
         # a model folder's own JSON files are the model path's problem, not the data's
         unless=r"(?:config|tokenizer\w*|generation_config|vocab|special_tokens_map|\w*index)\.json\b"),
    Rule("thread_limit", ("can't start new thread", "pthread_create", "Resource temporarily unavailable"),
         r"can't start new thread|pthread_create failed|thread: Resource temporarily unavailable|"
         r"Resource temporarily unavailable \[system:11\]"),
    Rule("model_path_invalid", ("HFValidationError", "not a valid model identifier", "does not appear to have a file"),
         r"HFValidationError: Repo id must be in the form|is not a local folder and is not a valid model identifier|"
         r"does not appear to have a file named config\.json"),
    Rule("state_dict_mismatch", ("size mismatch for", "in state_dict", "loading state_dict"),
         r"size mismatch for \S+: copying a param with shape|Error\(s\) in loading state_dict|"
         r"(?:Missing|Unexpected) key\(s\) in state_dict"),
    Rule("size_not_divisible", ("divisible by",),
         r"\b(?:must|should) be divisible by(?:the)?\b|\bis not divisible by \d+", unless=_SOURCE),
    Rule("ray_unschedulable", ("cannot be scheduled right now", "Waiting for creating a placement group",
                               "could not find a node type"),
         r"cannot be scheduled right now|Waiting for creating a placement group of specs for \d+ seconds|"
         r"could not find a node type to satisfy the request", any_level=True),
    Rule("rendezvous_unreachable", ("client socket has timed out", "client socket has failed to connect",
                                    "via c10d key-value store"),
         r"The client socket has timed out after \d+ms while trying to connect to|"
         r"via c10d key-value store by key .* got error: Socket Timeout"),
    # torch prints it only as a warning ([W...] socket.cpp), once per retry, until its own timeout: a run that then
    # went on keeps it as a handled note (timeline.py)
    Rule("rendezvous_unreachable", ("client socket has failed to connect",),
         r"The client socket has failed to connect to \S+ \(errno: 111 - Connection refused\)", any_level=True),
    Rule("collective_timeout", ("Watchdog caught collective operation timeout", "timed out in blocking wait",
                                "Timed out waiting", "Some NCCL operations have failed or timed out"),
         r"Watchdog caught collective operation timeout: Work(?:NCCL|Gloo)|WorkNCCL\(.*timed out in blocking wait|"
         r"Timed out waiting \d+ms for (?:recv|send) operation|"
         # the watchdog's next line, which is all a log cut after the timeout line still shows
         r"Some NCCL operations have failed or timed out"),
    Rule("ray_actor_died", ("Worker exit type", "ActorDiedError", "died unexpectedly", "A worker died"),
         r"Worker exit type: (?:SYSTEM_ERROR|NODE_OUT_OF_MEMORY)|ActorDiedError|actor died unexpectedly|"
         r"A worker died or was killed while executing a task",
         unless=r"Engine core proc \S+ died unexpectedly"),
)

# the rendezvous port of torch.distributed (TCPStore) is one of port_in_use's shapes (families/core.py); the others
# are further public threads of families of the first table whose log lines are kept verbatim
EXTRA_SOURCES = {
    "npu_oom": (GH + "vllm-project/vllm-ascend/issues/1987", GH + "vllm-project/vllm-ascend/issues/19",
                GH + "sgl-project/sglang/issues/29838"),
    "hccl_connect_timeout": (GH + "vllm-project/vllm-ascend/issues/5461",),
    "npu_runtime": (GH + "vllm-project/vllm-ascend/issues/2349", GH + "vllm-project/vllm-ascend/issues/1972",
                    GH + "sgl-project/sglang/issues/10554"),
    "hccl_exec_timeout": (GH + "vllm-project/vllm-ascend/issues/486", GH + "vllm-project/vllm-ascend/issues/3413",
                          GH + "Ascend/pytorch/issues/54"),
    "stream_sync_timeout": (GH + "vllm-project/vllm-ascend/issues/1443",),
    "peer_exited": (GH + "InternLM/lmdeploy/issues/3354",),
    "device_network": (GH + "vllm-project/vllm-ascend/issues/2643",),
    "file_handles": (GH + "ray-project/ray/issues/7169", GH + "ray-project/ray-legacy/issues/431",
                     GH + "areal-project/AReaL/issues/109"),
    "cann_not_sourced": (GH + "vllm-project/vllm-ascend/issues/1440",),
    "port_in_use": (GH + "meta-pytorch/torchtune/issues/392", GH + "intelligent-machine-learning/dlrover/issues/443",
                    GH + "verl-project/verl/issues/5889", GH + "vllm-project/vllm-ascend/issues/1955"),
}
