"""``verl-ascend convert`` and ``scripts/converter_hf_to_mcore.py``: HF -> Megatron dist checkpoint.

The flags are verl's (``--hf_model_path --output_path --use_cpu_initialization``, ``--pp_size
--ep_size``, ``--test``) plus ``--tp/--pp/--ep``, ``--dtype``, ``--verify``, ``--verify_only`` and
``--overwrite``. Exit codes: 0 done (and verified when asked), 1 verification found differences,
2 bad input (the message names the value and the fix), 130 interrupted. ``scripts/converter_hf_to_mcore.py`` is
``cli.script("convert")``: this parser under the script's name.
"""

import argparse
import sys

EXAMPLES = """examples:
  one process (CPU host, or one NPU):
    python scripts/converter_hf_to_mcore.py --hf_model_path Qwen3-8B --output_path Qwen3-8B-mcore --verify
  several ranks (any mix of --tp/--pp/--ep whose product fits the world size):
    torchrun --nproc_per_node 8 scripts/converter_hf_to_mcore.py --hf_model_path Qwen3-30B-A3B \\
        --output_path Qwen3-30B-A3B-mcore --ep 8 --use_cpu_initialization --verify
  check an existing checkpoint at another world size:
    torchrun --nproc_per_node 2 scripts/converter_hf_to_mcore.py --hf_model_path Qwen3-8B \\
        --output_path Qwen3-8B-mcore --verify_only --tp 2
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hf_model_path", required=True, help="local HF model folder (config.json + *.safetensors)")
    parser.add_argument("--output_path", required=True, help="Megatron dist-checkpoint folder to create")
    parser.add_argument("--tp", "--tp_size", dest="tp", type=int, default=1, help="tensor parallel size (default 1)")
    parser.add_argument("--pp", "--pp_size", dest="pp", type=int, default=1, help="pipeline parallel size (default 1)")
    parser.add_argument("--ep", "--ep_size", dest="ep", type=int, default=1, help="expert parallel size, MoE only (default 1)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16",
                        help="dtype of the written weights (default bf16, as verl trains)")
    parser.add_argument("--use_cpu_initialization", action="store_true",
                        help="keep the weights in host memory on NPU/GPU hosts (always so on CPU hosts)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty --output_path (only once the new checkpoint is complete)")
    parser.add_argument("--verify", "--test", dest="verify", action="store_true",
                        help="after writing, reload the checkpoint at another layout and compare every tensor "
                             "with the HF source (+ logits on one rank)")
    parser.add_argument("--verify_only", action="store_true",
                        help="do not convert: verify an existing --output_path at this run's world size and --tp/--pp/--ep")
    parser.add_argument("--trust_remote_code", action="store_true", help="accepted for verl compatibility; unused")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="converter_hf_to_mcore.py", description=__doc__.split("\n")[0],
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def register(sub) -> None:
    parser = sub.add_parser("convert", help="convert a HF checkpoint to a Megatron dist checkpoint (and verify it)",
                            description=__doc__.split("\n")[0], epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from verl_ascend.convert import job

    try:
        return job.run(args)  # ConvertError (bad input): cli.main / cli.script say it, exit 2
    except KeyboardInterrupt:  # what the interruption left behind, which only the job knows
        print(job.interrupted_message(args.output_path), file=sys.stderr)
        return 130
