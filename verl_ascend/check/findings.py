"""How ``check`` states a finding: which rule, how bad, which config keys, what the numbers are, the fix.

The record is the one every command uses (:class:`verl_ascend.core.findings.Finding`); its subject
is the rule class: extract (no trainer launch found), compose (Hydra composition failed), verl
(verl's own validation refused the config), parallel, batch, lengths, pipeline, heads, experts,
hbm (memory per rank of the device profile), known-bad, env (launch environment), trainer (the
trainer loop this verl takes), model (model facts unavailable: some rules skipped).
"""

from verl_ascend.core.findings import ERROR, INFO, WARNING, Finding, exit_code

__all__ = ["ERROR", "INFO", "WARNING", "exit_code", "finding"]


def finding(rule: str, severity: str, keys, message: str, fix: str = "") -> Finding:
    """Argument order of the rules' call sites: rule and severity first, then the keys they name."""
    return Finding(severity, rule, message, fix, keys=keys)
