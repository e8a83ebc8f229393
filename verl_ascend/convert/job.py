"""One conversion run: check the inputs, convert (or not, for ``--verify_only``), verify, report.

``run(options)`` is what ``verl-ascend convert`` and ``scripts/converter_hf_to_mcore.py`` call with
their parsed flags. Bad input raises :class:`~.hf_source.ConvertError` (a ``BadInput``; the platform's
``AscendRuntimeError`` becomes :class:`NpuRuntimeUnusable`) before anything is written; the return value is 0 when done (and verified
when asked) and 1 when verification found differences.
"""

import json
import os
import sys

from verl_ascend.core import platform

from .hf_source import ConvertError


class NpuRuntimeUnusable(ConvertError):
    """An Ascend host whose torch_npu cannot be used: this environment cannot convert (the fix is CANN's)."""


# What an interruption leaves behind: set once the checkpoint is in place (rank 0's view).
_state = {"complete": None}


def interrupted_message(output_path: str) -> str:
    if _state["complete"]:
        return (f"interrupted during verification: the checkpoint at {_state['complete']} is complete but not "
                "verified (its verl_ascend_convert.json says so); check it later with --verify_only")
    return f"interrupted: nothing was written to --output_path {output_path}"


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


def run(options) -> int:
    try:
        return _run(options)
    except platform.AscendRuntimeError as exc:  # the host's NPU runtime, not a crash of ours: bad environment
        raise NpuRuntimeUnusable(str(exc)) from None


def _run(options) -> int:
    """Convert and/or verify as ``options`` (the parsed convert flags) ask."""
    from verl_ascend.convert import requirements
    from verl_ascend.convert.hf_source import ConvertError, Layout, check_layout, inspect

    # The input first (config.json and the safetensors headers, read in well under a second): a wrong path is
    # named before megatron-core and mbridge are imported (~10 CPU-s), and before anything is written.
    ckpt = inspect(options.hf_model_path)
    layout = Layout(options.tp, options.pp, options.ep, int(os.environ.get("WORLD_SIZE", "1")))
    check_layout(ckpt, layout)
    requirements.check()  # megatron-core / mbridge able to convert, before the output path is touched
    from verl_ascend.convert import runtime

    device, backend = runtime.choose_device()
    check_layout(ckpt, layout, device)
    if options.verify_only:
        if not os.path.isfile(os.path.join(options.output_path, "metadata.json")):
            raise ConvertError(f"--verify_only: {options.output_path!r} is not a Megatron dist checkpoint "
                               "(no metadata.json). Fix: convert first, or pass the right --output_path.")
    else:
        from verl_ascend.convert.writer import check_output

        check_output(options.output_path, options.overwrite)
    return _run_checked(options, ckpt, layout, device, backend)


def _run_checked(options, ckpt, layout, device, backend) -> int:
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

    dtype = DTYPES[options.dtype]
    summary = {"hf_model_path": ckpt.path, "output_path": options.output_path, "device": device, "backend": backend}
    if options.verify_only:
        try:
            with open(os.path.join(options.output_path, INFO_FILE)) as f:
                dtype = DTYPES[json.load(f)["dtype"]]
        except (OSError, ValueError, KeyError):
            pass  # converted by another tool: trust --dtype
    else:
        summary["written"] = convert(ckpt, options.output_path, layout, dtype, device,
                                     on_host=options.use_cpu_initialization or device == "cpu",
                                     progress=progress(f"convert {layout}"))
        _state["complete"] = os.path.abspath(options.output_path)
    if options.verify or options.verify_only:
        check = layout if options.verify_only else _alternative_layout(layout, ckpt, device)
        how = {"tp": check.tp, "pp": check.pp, "ep": check.ep, "world_size": check.world}
        try:
            summary["verified"] = verify(ckpt, options.output_path, check, dtype, device, progress(f"verify {check}"))
        except VerifyError as exc:
            if rank == 0:
                record_verification(options.output_path, {"status": "failed", "reloaded_as": how, "error": str(exc)})
                print(f"verification FAILED: {exc}", file=sys.stderr)
            return 1
        if rank == 0:
            record_verification(options.output_path, {"status": "passed", "reloaded_as": how,
                                                      "result": summary["verified"]})
    if rank == 0:
        print(json.dumps(summary))
    return 0
