"""--verify: reload a written checkpoint (at any layout / world size) and prove it equals the HF source.

The check runs the opposite direction of the conversion: each reloaded Megatron tensor is gathered
across tensor-parallel ranks and turned back into HF tensors with mbridge's export code
(``_weight_merge_across_tp``, ``_weight_to_hf_format``), which shares nothing with the import path
but the name table. Every HF tensor must be matched exactly (after casting the HF tensor to the
checkpoint dtype). On a single rank, small models also get a forward-pass comparison of logits
against transformers' own implementation, which shares no code with mbridge at all.
"""

import torch

from . import runtime
from .hf_source import HFCheckpoint, Layout
from .model import build_model, is_expert, make_bridge, tensor_names
from .weights import HFReader

LOGITS_MAX_BYTES = 2 << 30  # a CPU forward pass of both models beyond this is not "a few seconds"


class VerifyError(Exception):
    """The checkpoint does not match its HF source; the message names the tensors."""


def load_checkpoint(ckpt: HFCheckpoint, path: str, layout: Layout, dtype, device: str):
    from megatron.core import dist_checkpointing

    runtime.init_model_parallel(layout.tp, layout.pp, layout.ep)
    bridge = make_bridge(ckpt, dtype)
    model = build_model(bridge)
    with runtime.cpu_cuda_calls(device):
        state = dist_checkpointing.load(model.sharded_state_dict(), path)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("_extra_state")]
    if missing:
        raise VerifyError(f"checkpoint {path!r} lacks {len(missing)} tensor(s) of this model, e.g. {missing[:3]}")
    return model, bridge


def compare(model, bridge, ckpt: HFCheckpoint, dtype, progress) -> tuple:
    """(mismatches [(hf name, megatron name, detail)], HF names checked) on this rank."""
    import torch.distributed as dist
    from megatron.core import parallel_state as mpu

    reader = HFReader(ckpt)
    state = model.state_dict(keep_vars=True)
    tp, tp_rank = mpu.get_tensor_model_parallel_world_size(), mpu.get_tensor_model_parallel_rank()
    bad, checked = [], set()
    for local, name in progress(tensor_names(model, bridge)):
        param = state[local].detach()
        if tp > 1 and not is_expert(name) and getattr(state[local], "tensor_model_parallel", False):
            parts = [torch.empty_like(param) for _ in range(tp)]
            dist.all_gather(parts, param.contiguous(), group=mpu.get_tensor_model_parallel_group())
            merged = bridge._weight_merge_across_tp(name, parts, state[local])
        else:
            merged = param
        if tp_rank != 0:  # every TP rank joined the gather; one of them compares
            continue
        hf_names, tensors = bridge._weight_to_hf_format(name, merged)
        for hf_name, got in zip(hf_names, tensors):
            want = reader.get(hf_name).to(dtype)
            checked.add(hf_name)
            if got.dtype != dtype:
                bad.append((hf_name, name, f"dtype {got.dtype} != {dtype}"))
            elif tuple(got.shape) != tuple(want.shape):
                bad.append((hf_name, name, f"shape {tuple(got.shape)} != HF {tuple(want.shape)}"))
            elif not torch.equal(got.cpu(), want):
                diff = (got.cpu().float() - want.float()).abs()
                bad.append((hf_name, name, f"{int((diff > 0).sum())} of {diff.numel()} values differ, "
                                           f"max |diff| {diff.max().item():.3g}"))
    return bad, checked


def verify(ckpt: HFCheckpoint, path: str, layout: Layout, dtype, device: str, progress) -> dict:
    """Raise VerifyError on any difference; return a summary (identical on every rank)."""
    import torch.distributed as dist

    try:
        model, bridge = load_checkpoint(ckpt, path, layout, dtype, device)
        bad, checked = compare(model, bridge, ckpt, dtype, progress)
        parts = [None] * dist.get_world_size()
        dist.all_gather_object(parts, (bad, sorted(checked)))
        bad = sorted({b for p in parts for b in p[0]})
        checked = set().union(*(set(p[1]) for p in parts))
        unchecked = sorted(set(ckpt.weight_map) - checked)
        problems = [f"  {h} (megatron {m}): {d}" for h, m, d in bad]
        problems += [f"  {h}: not found in the checkpoint" for h in unchecked]
        if problems:
            raise VerifyError(f"checkpoint {path!r} differs from {ckpt.path!r} in {len(problems)} tensor(s):\n"
                              + "\n".join(problems[:50]))
        summary = {"verified_tensors": len(checked), "layout": str(layout)}
        if layout.world == 1 and ckpt.nbytes() <= LOGITS_MAX_BYTES:
            summary["logits_max_abs_diff"] = logits_check(model, ckpt, dtype, device)
        return summary
    finally:
        runtime.destroy_model_parallel()


def logits_check(model, ckpt: HFCheckpoint, dtype, device: str) -> float:
    """Max |logits difference| between the reloaded Megatron model and transformers on 8 tokens."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(ckpt.path, dtype=dtype).eval()
    vocab = int(ckpt.config["vocab_size"])
    tokens = torch.arange(8).mul(7919).remainder(vocab).unsqueeze(0)
    positions = torch.arange(8).unsqueeze(0)
    # An explicit causal mask (True = hidden): megatron's default one is built on a CUDA device.
    mask = torch.ones(1, 1, 8, 8, dtype=torch.bool).triu(diagonal=1)
    model.eval()
    with torch.no_grad(), runtime.cpu_forward(device):
        want = hf(input_ids=tokens).logits.float()
        got = model(tokens, positions, attention_mask=mask).float()
    diff = (got - want).abs().max().item()
    tolerance = 1e-3 if dtype == torch.float32 else 0.1 * max(1.0, want.abs().max().item())
    if not diff <= tolerance:
        raise VerifyError(f"forward-pass logits differ from transformers by {diff:.3g} (> {tolerance:.3g}) "
                          "although every tensor matched: the Megatron config built from config.json "
                          "(rope, norm, router) does not reproduce the HF model.")
    return diff
