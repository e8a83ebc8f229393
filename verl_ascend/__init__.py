"""verl-ascend: run verl's own PPO/GRPO/DAPO trainers on Huawei Ascend NPU clusters.

Importing this package is deliberately cheap: it does not import torch, ray or verl.
Activation happens through ``verl_ascend.plugin`` (verl's ``verl.plugins`` entry point) or the
``verl_ascend.pth`` file that the wheel installs into site-packages; see ``core.activation``.
"""

__version__ = "0.1.0"
