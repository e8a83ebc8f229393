"""Every runtime patch verl-ascend applies, where it runs, and when it can go.

Each module (or package, with its private algorithm inside) below holds one fix and documents it (Why / How / Upstream / Remove when); its
``PATCH`` record names the modules whose import triggers it, and ``verl_ascend.core.activation``
lists the same names as strings, so start-up imports none of this code. Disable one with
``VERL_ASCEND_PATCHES=-name``, all with ``VERL_ASCEND=0``. ``verl-ascend status`` shows what
happened to each in a process.

In every process (driver, TaskRunner, workers):
    device            verl.utils.device         NPU wins over CUDA on Ascend hosts
    torch_npu_save    torch -> torch_npu        torch.save restores UntypedStorage.nbytes (no RecursionError;
                                                torch_npu builds of 2024-01 to 2025-03 only)
    tensordict_sync   verl                      TensorDict.to("cpu") waits for the NPU although vllm-ascend
                                                left torch.cuda.Event a no-op (tensordict >= 0.12 only)
    mindspeed         verl -> megatron, workers MindSpeed adaptor first; options to repatch per MindSpeed generation
    expandable_segments  verl.utils.device      verl's sleep/wake toggle of expandable segments acts on NPU
                                                (verl 0.6.1-0.7.x with a torch_npu that has the allocator call)
    ckpt_validation   torch.distributed.checkpoint / _shard   fast shard-layout checks (any host)
In the driver:
    ray_runtime_env   ray                       VERL_ASCEND* settings reach every Ray worker
In the TaskRunner:
    trainer_device    verl.trainer.ppo.ray_trainer   trainer.device cuda -> npu (verl <= 0.6)
    deadline_save     verl.trainer.ppo.v1.trainer_base   trainer v1 forces a save when the allocation ends, as the
                                                legacy trainer does (verl's ESI check; any host)
Where generation batches are split across rollout workers (driver / TaskRunner):
    rollout_order     verl.experimental.agent_loop.agent_loop, verl.single_controller.ray.base
                      tiled rollout dispatch, verl's interleaved order on the output
Only in a `verl-ascend rehearse` run (VERL_ASCEND_REHEARSE=1; verl_ascend/rehearse/loop/runtime.py):
    rehearse_platform, rehearse_backend, rehearse_offload, rehearse_rollout, rehearse_value_head,
    rehearse_report   CPU platform, gloo back-end string, FSDP2 offload without pinning, the `hf`
                      rollout, a critic's value model with sdpa, the loop's own line on the rollout
                      dispatch path and rollout_order
"""
