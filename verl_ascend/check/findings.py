"""A finding: which rule, how bad, which config keys, what the numbers are, and how to fix it."""

import dataclasses

from verl_ascend.core import findings as policy

ERROR = "error"
WARNING = "warning"
INFO = "info"

# Rule classes, in report order. Tests plant one error of each class into a shipped recipe.
RULES = (
    "extract",    # no trainer launch found in the script
    "compose",    # Hydra/verl config composition failed (unknown key without '+', bad value)
    "verl",       # verl's own validation (validate_config, config dataclasses) refused the config
    "parallel",   # world size vs TP x PP x CP (x EP) of actor, ref, rollout
    "batch",      # batch / mini-batch / micro-batch / n across data-parallel ranks
    "lengths",    # prompt + response vs rollout and model limits
    "pipeline",   # pipeline stage layer split vs the model's layer count
    "heads",      # attention heads / KV heads vs tensor parallel
    "experts",    # MoE experts vs expert parallel
    "hbm",        # memory estimate per rank of the device profile (A2/A5 card, A3 die)
    "known-bad",  # combinations known to fail (mbridge + VPP, trainer.device=cuda on old verl)
    "env",        # launch environment (HCCL/GLOO interfaces)
    "model",      # model facts unavailable: some rules skipped
)


@dataclasses.dataclass
class Finding:
    rule: str
    severity: str
    keys: tuple
    message: str
    fix: str = ""

    def as_dict(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "keys": list(self.keys),
                "message": self.message, "fix": self.fix}


def exit_code(findings) -> int:
    return policy.exit_code(f.severity for f in findings)
