"""``verl-ascend convert`` and ``scripts/converter_hf_to_mcore.py``: HF -> Megatron dist checkpoint.

The flags are verl's (``--hf_model_path --output_path --use_cpu_initialization``, ``--pp_size
--ep_size``, ``--test``) plus ``--tp/--pp/--ep``, ``--dtype``, ``--verify``, ``--verify_only`` and
``--overwrite``. Exit codes: 0 done (and verified when asked), 1 verification found differences,
2 bad input (the message names the value and the fix), 130 interrupted.
"""

import argparse
import json
import os
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
    return parser


def register(sub) -> None:
    parser = sub.add_parser("convert", help="convert a HF checkpoint to a Megatron dist checkpoint (and verify it)",
                            description=__doc__.split("\n")[0], epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=_guarded)


# What an interruption leaves behind: set once the checkpoint is in place (rank 0's view).
_state = {"complete": None}


def interrupted_message(output_path: str) -> str:
    if _state["complete"]:
        return (f"interrupted during verification: the checkpoint at {_state['complete']} is complete but not "
                "verified (its verl_ascend_convert.json says so); check it later with --verify_only")
    return f"interrupted: nothing was written to --output_path {output_path}"


def _guarded(args) -> int:
    try:
        return run(args)
    except KeyboardInterrupt:
        print(interrupted_message(args.output_path), file=sys.stderr)
        return 130


def main(argv=None) -> int:
    return _guarded(build_parser().parse_args(argv))


def _alternative_layout(layout, ckpt, device):
    """A different split of the same world size for the --verify reload (or the same if none fits)."""
    from verl_ascend.convert.hf_source import ConvertError, Layout, check_layout

    candidates = [Layout(layout.pp, layout.tp, layout.ep, layout.world),
                  Layout(layout.ep, layout.pp, 1, layout.world), Layout(1, layout.ep, 1, layout.world),
                  Layout(layout.tp * layout.pp, 1, 1, layout.world)]
    for cand in candidates:
        if (cand.tp, cand.pp, cand.ep) == (layout.tp, layout.pp, layout.ep):
            continue
        try:
            check_layout(ckpt, cand, device)
            return cand
        except ConvertError:
            continue
    return layout


def run(args) -> int:
    from verl_ascend.convert.hf_source import ConvertError, Layout, check_layout, inspect
    from verl_ascend.core import platform

    try:
        ckpt = inspect(args.hf_model_path)
        layout = Layout(args.tp, args.pp, args.ep, int(os.environ.get("WORLD_SIZE", "1")))
        check_layout(ckpt, layout)
        from verl_ascend.convert import runtime

        device, backend = runtime.choose_device()
        check_layout(ckpt, layout, device)
        if args.verify_only:
            if not os.path.isfile(os.path.join(args.output_path, "metadata.json")):
                raise ConvertError(f"--verify_only: {args.output_path!r} is not a Megatron dist checkpoint "
                                   "(no metadata.json). Fix: convert first, or pass the right --output_path.")
        else:
            from verl_ascend.convert.writer import check_output

            check_output(args.output_path, args.overwrite)
        return _run_checked(args, ckpt, layout, device, backend)
    except (ConvertError, platform.AscendRuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run_checked(args, ckpt, layout, device, backend) -> int:
    import torch.distributed as dist
    from tqdm import tqdm

    from verl_ascend.convert import runtime
    from verl_ascend.convert.model import DTYPES
    from verl_ascend.convert.verify import VerifyError, verify
    from verl_ascend.convert.writer import INFO_FILE, convert, record_verification

    runtime.init_distributed(device, backend)
    rank = dist.get_rank()

    def progress(label):
        return lambda items: tqdm(items, desc=label, unit="tensor", disable=rank != 0, file=sys.stderr)

    dtype = DTYPES[args.dtype]
    summary = {"hf_model_path": ckpt.path, "output_path": args.output_path, "device": device, "backend": backend}
    if args.verify_only:
        try:
            with open(os.path.join(args.output_path, INFO_FILE)) as f:
                dtype = DTYPES[json.load(f)["dtype"]]
        except (OSError, ValueError, KeyError):
            pass  # converted by another tool: trust --dtype
    else:
        summary["written"] = convert(ckpt, args.output_path, layout, dtype, device,
                                     on_host=args.use_cpu_initialization or device == "cpu",
                                     progress=progress(f"convert {layout}"))
        _state["complete"] = os.path.abspath(args.output_path)
    if args.verify or args.verify_only:
        check = layout if args.verify_only else _alternative_layout(layout, ckpt, device)
        how = {"tp": check.tp, "pp": check.pp, "ep": check.ep, "world_size": check.world}
        try:
            summary["verified"] = verify(ckpt, args.output_path, check, dtype, device, progress(f"verify {check}"))
        except VerifyError as exc:
            if rank == 0:
                record_verification(args.output_path, {"status": "failed", "reloaded_as": how, "error": str(exc)})
                print(f"verification FAILED: {exc}", file=sys.stderr)
            return 1
        if rank == 0:
            record_verification(args.output_path, {"status": "passed", "reloaded_as": how,
                                                   "result": summary["verified"]})
    if rank == 0:
        print(json.dumps(summary))
    return 0
