"""Where a conversion runs: device, process group, Megatron parallel state.

The device comes from the foundation's host detection (``verl_ascend.core.platform``), not from
``torch.cuda.is_available()``: on Ascend, MindSpeed's ``transfer_to_npu`` makes torch.cuda look
available, which is why verl's own converter asks for NCCL there (docs/field-reports.md#235b-converter-picks-cuda).
"""

import contextlib
import datetime
import os

from verl_ascend.core import platform


def choose_device() -> tuple:
    """(device type, backend): ('npu', 'hccl') on Ascend, ('cuda', 'nccl') on GPUs, else ('cpu', 'gloo')."""
    import torch

    if platform.is_ascend_host():
        platform.require_torch_npu()  # a broken CANN environment is an error, not a silent CPU run
        return "npu", "hccl"
    if torch.cuda.is_available():
        return "cuda", "nccl"
    return "cpu", "gloo"


def init_distributed(device: str, backend: str) -> None:
    """Join (or create, for a plain ``python`` run) the default process group.

    On accelerators the group also gets gloo for CPU tensors: with --use_cpu_initialization the
    weights stay in host memory and checkpoint collectives then run over gloo.
    """
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if "WORLD_SIZE" not in os.environ:  # single process started without torchrun
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    if device != "cpu":
        getattr(torch, device).set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = f"cpu:gloo,{device}:{backend}"
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=60))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_model_parallel(tp: int, pp: int, ep: int) -> None:
    from megatron.core import parallel_state as mpu

    mpu.destroy_model_parallel()
    mpu.initialize_model_parallel(
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        expert_model_parallel_size=ep,
        expert_tensor_parallel_size=1,
    )


def destroy_model_parallel() -> None:
    from megatron.core import parallel_state as mpu

    mpu.destroy_model_parallel()


@contextlib.contextmanager
def cpu_cuda_calls(device: str):
    """On a CPU-only host, answer the few torch.cuda calls megatron-core makes unconditionally.

    Why this is product code: a real conversion on a CPU host (login node, no accelerator) goes
    through megatron's ``dist_checkpointing.save``, which calls ``torch.cuda.synchronize()`` and
    builds a small status tensor on ``torch.cuda.current_device()``; the forward pass used by
    --verify seeds a CUDA RNG tracker. With no CUDA these raise. Inside this block, and only when
    the conversion device is the CPU, ``synchronize`` is a no-op (there is no device work to wait
    for) and ``current_device`` names the CPU, so those tensors live in host memory (gloo handles
    them). Everything is restored on exit.
    """
    import torch

    if device != "cpu" or torch.cuda.is_available():
        yield
        return
    saved = {name: getattr(torch.cuda, name) for name in ("synchronize", "current_device")}
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)


class _EvalHostRNG:
    """Stands in for megatron's CUDA RNG tracker during an eval-mode forward on the CPU.

    Attention always enters ``get_cuda_rng_tracker().fork()`` around its dropout; in eval mode
    dropout draws no random numbers, so forking nothing is exact.
    """

    def fork(self, name=None):
        return contextlib.nullcontext()


@contextlib.contextmanager
def cpu_forward(device: str):
    """CUDA-free eval forward of a megatron model on a CPU host (used by --verify's logits check)."""
    import torch
    from megatron.core.tensor_parallel import random as mrandom

    if device != "cpu" or torch.cuda.is_available():
        yield
        return
    from megatron.core.transformer.moe import moe_utils

    saved = mrandom._CUDA_RNG_STATE_TRACKER, mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED
    mrandom._CUDA_RNG_STATE_TRACKER, mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED = _EvalHostRNG(), True
    # megatron-core 0.16 leaves ``te_general_gemm`` undefined (not None) when Transformer Engine is
    # absent, so the MoE router raises NameError; None selects its plain torch.mm branch.
    no_te_gemm = not hasattr(moe_utils, "te_general_gemm")
    if no_te_gemm:
        moe_utils.te_general_gemm = None
    try:
        with cpu_cuda_calls(device):
            yield
    finally:
        mrandom._CUDA_RNG_STATE_TRACKER, mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED = saved
        if no_te_gemm:
            del moe_utils.te_general_gemm
