"""All-reduce smoke test for Ascend (HCCL) or CPU (Gloo) clusters; run it with torchrun.

    torchrun --nproc_per_node 8 scripts/hccl_check.py
    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 --master_addr HEAD --master_port 29500 scripts/hccl_check.py

The logic lives in verl_ascend.doctor.allreduce (see `verl-ascend doctor` for the node checks).
"""

import sys

from verl_ascend.doctor.allreduce import main

if __name__ == "__main__":
    sys.exit(main())
