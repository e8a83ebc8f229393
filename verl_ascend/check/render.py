"""Text rendering of a check :class:`~.report.Report` (its JSON is the shared envelope, ``Report.to_json``):
the recipe's header lines, then the findings and the result line every command shows."""

from verl_ascend.core.findings import lines as finding_lines
from verl_ascend.core.findings import verdict


def text(report) -> str:
    lines = [f"recipe: {report.recipe}"]
    d = report.device
    lines.append(f"device: {d['profile']} ({d['title']}; memory per {d['per']}: {d['rank_gb']:.0f} GB)")
    if report.entry is not None:
        lines.append(f"entry:  python -m {report.entry} ({len(report.overrides or [])} overrides)")
    if report.config_source is not None:
        lines.append(f"config: {report.config_source} (verl {report.verl_version or '?'})")
    model = report.model
    if model:
        lines.append(f"model:  {model['name']}: {model['layers']} layers, {model['heads']} heads / "
                     f"{model['kv_heads']} KV heads" + (f", {model['experts']} experts" if model["experts"] else "")
                     + f", {model['params_b']}B params ({model['source']})")
    layout = report.layout
    if layout:
        parts = [f"world {layout['world_size']}"]
        for role in ("actor", "ref"):
            if role in layout:
                r = layout[role]
                parts.append(f"{role} TP{r['tp']} PP{r['pp']} CP{r['cp']} EP{r['ep']} DP{r['dp'] or '?'}")
        ro = layout["rollout"]
        parts.append(f"rollout {ro['name']} TP{ro['tp']} DP{ro['dp']} EP{ro['ep']} x{ro['replicas'] or '?'} replicas")
        lines.append("layout: " + "; ".join(parts))
    if report.skipped:
        shown = report.skipped[:12]
        more = len(report.skipped) - len(shown)
        lines.append("skipped (not run): " + "; ".join(shown) + (f"; … {more} more" if more else ""))
    verl = report.verl_validation
    if verl:
        state = "passed" if not verl["errors"] else "refused: " + " | ".join(verl["errors"])
        lines.append(f"verl:   {', '.join(verl['ran']) or 'no validation found'}: {state}")
    lines += finding_lines(report.findings)
    lines.append(verdict(report.exit_code))
    return "\n".join(lines)
