"""`ckpt check DIR [--recipe R.sh]`: the scan (and the recipe comparison) as one report, printed as text or JSON."""

import dataclasses
from pathlib import Path

from verl_ascend.core import findings as F


class NoSuchFolder(F.BadInput):
    pass


@dataclasses.dataclass
class CheckReport:
    dir: str
    step: int = None        # the step a resume would load
    recipe: dict = None     # the recipe's world size and layout, with --recipe
    roles: dict = dataclasses.field(default_factory=dict)  # role -> {kind, world_size, parallel, optimizer_format}
    findings: list = dataclasses.field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return F.exit_code(self.findings)

    def to_json(self) -> str:
        return F.to_json("ckpt check", self.findings, dir=self.dir, step=self.step, recipe=self.recipe, roles=self.roles)

    def text(self) -> str:
        out = [f"checkpoint: {self.dir}" + (f" (resume would load global_step_{self.step})" if self.step is not None
                                           else "")]
        for name, r in self.roles.items():
            out.append(f"  {name}: {r['kind']}, world size {r['world_size']}"
                       + (f", {r['parallel']}" if r["parallel"] else "")
                       + (f", optimizer {r['optimizer_format']}" if r["optimizer_format"] else ""))
        return "\n".join(out + F.lines(self.findings) + [F.verdict(self.exit_code, ok="resumable")])


def check(folder: str, recipe: str = None) -> CheckReport:
    """Bad input (no such folder, a --recipe that cannot be read) raises a BadInput subclass."""
    from verl_ascend.ckpt.scan import scan

    root = Path(folder)
    if not root.is_dir():
        raise NoSuchFolder(f"{folder}: no such folder; pass trainer.default_local_dir")
    plan = None
    if recipe:  # read before the scan: a bad --recipe is refused before any work
        from verl_ascend.ckpt.recipe import planned

        plan = planned(recipe)
    found, by_step = scan(root)
    if plan is not None:
        from verl_ascend.ckpt.recipe import compare

        for roles in by_step.values():
            found += compare(roles, plan)
    roles = {r.name: {"kind": r.kind, "world_size": r.world_size, "parallel": r.parallel,
                      "optimizer_format": r.optim_sharding} for roles in by_step.values() for r in roles}
    return CheckReport(str(root), next(iter(by_step), None), plan, roles, found)


def run(folder: str, recipe: str = None, as_json: bool = False) -> int:
    report = check(folder, recipe)
    print(report.to_json() if as_json else report.text())
    return report.exit_code
