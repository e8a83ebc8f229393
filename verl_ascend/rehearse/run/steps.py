"""The rehearsal's steps outside main_ppo that start processes: before the first run, the conversion of the tiny model.

(Between the runs, the per-node ``ckpt check`` / ``ckpt sync`` of a multi-node rehearsal: :mod:`.multinode`.) Each
runs through ``trainer.step``: marked, in its own PID namespace, ended with ``rehearse`` however it ends.
"""

import os
import sys
from pathlib import Path

from verl_ascend.core import settings
from verl_ascend.rehearse.plan.engine import CPU_RUN, ConvertFailed
from verl_ascend.rehearse.run import trainer

CONVERT_TIMEOUT = 1800  # seconds; the 235B recipe's tiny MoE converts in ~40 CPU-s on a loaded 2-core host


def convert_tiny_model(model_dir: Path, output: str) -> None:
    """The tiny HF model -> a Megatron dist checkpoint, by our converter, in its own process (as a user runs it)."""
    print(f"rehearse: converting the tiny model to a Megatron dist checkpoint (verl-ascend convert) -> {output} ...",
          flush=True)
    env = {k: v for k, v in os.environ.items() if k != settings.REHEARSE}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", **CPU_RUN)
    proc = trainer.step([sys.executable, "-m", "verl_ascend", "convert", "--hf_model_path", str(model_dir),
                         "--output_path", output], "convert", CONVERT_TIMEOUT, env=env)
    if proc.returncode != 0:
        tail = proc.stdout.strip().splitlines()[-5:]
        raise ConvertFailed(f"verl-ascend convert of the tiny model failed (exit {proc.returncode}): " + " | ".join(tail))
