"""Text rendering of a check report (JSON is the report dict itself): the recipe's header lines, then
the findings and the result line every command shows."""

from verl_ascend.core.findings import Finding, verdict
from verl_ascend.core.findings import lines as finding_lines


def text(report: dict) -> str:
    lines = [f"recipe: {report['recipe']}"]
    if "device" in report:
        d = report["device"]
        lines.append(f"device: {d['profile']} ({d['title']}; memory per {d['per']}: {d['rank_gb']:.0f} GB)")
    if "entry" in report:
        lines.append(f"entry:  python -m {report['entry']} ({len(report.get('overrides', []))} overrides)")
    if "config_source" in report:
        lines.append(f"config: {report['config_source']} (verl {report.get('verl_version', '?')})")
    model = report.get("model")
    if model:
        lines.append(f"model:  {model['name']}: {model['layers']} layers, {model['heads']} heads / "
                     f"{model['kv_heads']} KV heads" + (f", {model['experts']} experts" if model["experts"] else "")
                     + f", {model['params_b']}B params ({model['source']})")
    layout = report.get("layout")
    if layout:
        parts = [f"world {layout['world_size']}"]
        for role in ("actor", "ref"):
            if role in layout:
                r = layout[role]
                parts.append(f"{role} TP{r['tp']} PP{r['pp']} CP{r['cp']} EP{r['ep']} DP{r['dp'] or '?'}")
        ro = layout["rollout"]
        parts.append(f"rollout {ro['name']} TP{ro['tp']} DP{ro['dp']} EP{ro['ep']} x{ro['replicas'] or '?'} replicas")
        lines.append("layout: " + "; ".join(parts))
    if report.get("skipped"):
        shown = report["skipped"][:12]
        more = len(report["skipped"]) - len(shown)
        lines.append("skipped (not run): " + "; ".join(shown) + (f"; … {more} more" if more else ""))
    verl = report.get("verl_validation")
    if verl:
        state = "passed" if not verl["errors"] else "refused: " + " | ".join(verl["errors"])
        lines.append(f"verl:   {', '.join(verl['ran']) or 'no validation found'}: {state}")
    lines += finding_lines(Finding(**f) for f in report["findings"])
    lines.append(verdict(report["exit_code"]))
    return "\n".join(lines)
