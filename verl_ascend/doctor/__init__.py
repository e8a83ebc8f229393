"""`verl-ascend doctor`: is this node ready for a verl job on Ascend NPUs?

Modules: ``findings`` (ok / warn / error / skip makers of the shared record, text and JSON), ``software`` (Python,
torch/torch_npu, CANN, versions, patch status), ``devices`` (npu-smi, hccn.conf), ``network``
(interfaces, HCCL/Gloo interface variables, port base; shared with ``scripts/hccl_check.py``),
``environment`` (timeouts, visible devices, ulimit), ``cluster`` (the local Ray head),
``allreduce`` (the torchrun smoke test). Importing this package stays cheap: the CLI imports the
checks only when the command runs.
"""
