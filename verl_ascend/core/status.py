"""`verl-ascend status`: what the plugin did in this process: versions, device, every patch's state."""

import contextlib
import importlib
import importlib.util
import sys

from verl_ascend.core import activation, megatron_path, platform, registry, settings, support
from verl_ascend.core.findings import ERROR, WARNING, BadInput, Finding, exit_code, to_json


class UnknownPatch(BadInput):
    pass


def _import_targets(names) -> dict:
    """Import the targets of these patches so each gets the chance to decide; failures are reported."""
    errors = {}
    for name in names:
        if _rehearsal_only_here(name):
            continue  # their targets (megatron-core, FSDP2 internals) are no concern of a host outside a rehearsal
        for target in registry.get(name).targets:
            if target in sys.modules:
                continue
            try:
                importlib.import_module(target)
            except ModuleNotFoundError as exc:
                if exc.name and (target == exc.name or target.startswith(exc.name + ".")):
                    continue  # the module is not in this version (verl 0.6 has no trainer v1): _absent says so
                errors[target] = f"{type(exc).__name__}: {exc}"
            except Exception as exc:
                errors[target] = f"{type(exc).__name__}: {exc}"
    return errors


def _absent(row: dict) -> dict:
    """Targets that were never imported because this environment has no such module: 'not applicable', saying so
    (a patch for a part of verl another version has); the headline too when no target was reached."""
    def missing(target):
        try:
            return target is not None and importlib.util.find_spec(target) is None
        except ModuleNotFoundError:  # a parent package that is not there either
            return True
        except Exception:  # noqa: BLE001 - a parent that fails to import (a broken torch_npu): not known, left pending
            return False

    targets = [dict(t, state=registry.NOT_APPLICABLE, detail=f"{t['target']} is not in this environment")
               if t.get("state") == registry.PENDING and missing(t.get("target")) else t for t in row.get("targets", [])]
    if targets and all(t["state"] == registry.NOT_APPLICABLE for t in targets) and row["state"] == registry.PENDING:
        return dict(row, state=registry.NOT_APPLICABLE, detail=targets[0]["detail"], targets=targets)
    return dict(row, targets=targets)


def _rehearsal_only_here(name: str) -> bool:
    """A rehearsal-only record, in a process that is not a rehearsal."""
    return name.startswith("rehearse_") and not settings.in_rehearsal()


def _outside_rehearsal(row: dict) -> dict:
    """A rehearsal-only record outside a rehearsal: targets this process never imported say why
    (they stay 'pending': nothing decided them), and the headline reads not applicable, not 'pending'."""
    if not _rehearsal_only_here(row["name"]):
        return row
    why = "not imported: a rehearsal-only record (acts only inside `verl-ascend rehearse`)"
    targets = [dict(t, detail=why) if t.get("state") == registry.PENDING else t for t in row.get("targets", [])]
    quiet = (registry.PENDING, registry.NOT_APPLICABLE)
    if all(t["state"] in quiet for t in targets):
        detail = next((t["detail"] for t in targets if t["state"] == registry.NOT_APPLICABLE), why)
        return dict(row, state=registry.NOT_APPLICABLE, detail=detail, targets=targets)
    return dict(row, targets=targets)


def _device_answer() -> dict:
    try:
        from verl.utils.device import get_device_name, get_nccl_backend

        return {"device": get_device_name(), "backend": get_nccl_backend()}
    except Exception as exc:
        return {"device": None, "backend": None, "error": f"{type(exc).__name__}: {exc}"}


def collect(import_targets: bool = True, only=()) -> dict:
    """The report; ``only`` (patch names) limits the target imports and the patch table to those patches."""
    active = activation.activate(source="status")
    if only:
        _check_names(only)
    names = list(only) or registry.names()
    torch_error = platform.torch_import_problem()  # in a fresh interpreter: a failed import is final
    verl_error = f"import torch fails: {torch_error}" if torch_error else ""
    if not torch_error:
        try:
            import verl  # noqa: F401  (0.9: runs the entry point; older: triggers the hooks)
        except Exception as exc:
            verl_error = platform.describe(exc)
    tried = bool(import_targets and active and not verl_error)  # only then can a pending target be told absent
    import_errors = _import_targets(names) if tried else {}
    report = {
        "plugin": {**activation.activation_info(), "version": _plugin_version()},
        "versions": {
            dist: platform.installed_version(dist) or None
            for dist in ("verl", "torch", "torch_npu", "ray", "tensordict", "megatron-core", "mindspeed")
        },
        "ascend_host": platform.ascend_evidence(),
        "torch_import_error": torch_error or None,
        "verl_import_error": verl_error or None,
        "device": _device_answer() if not verl_error else {},
        "patches": [_outside_rehearsal(row) if _rehearsal_only_here(name) else _absent(row) if tried else row
                    for name, row in ((n, registry.summarize(n)) for n in names)],
        "target_import_errors": import_errors,
        "verl_support": support.verdict(),
        "verl_stack": _verl_stack(),
        "megatron_path": megatron_path.facts(),
        "settings": settings.report(),
    }
    return report


def _verl_stack():
    """Where this environment departs from the Ascend stack verl's install guide names (verl 0.9.x), or None
    where the guide names none for the installed verl. Metadata only: nothing is imported for it."""
    from verl_ascend.core import stacks

    versions = platform.installed_versions("verl", "torch", "torch-npu", "transformers", "vllm", "vllm-ascend",
                                           "megatron-core")
    if not stacks.stack_is_for(versions["verl"]):
        return None
    return {"source": stacks.VERL_SOURCE, "stack": dict(stacks.VERL_STACK),
            "departures": [text for text, _ in stacks.stack_departures(versions, sys.version_info)]}


def _check_names(only) -> None:
    known = registry.names()
    unknown = [name for name in only if name not in known]
    if unknown and known:
        raise UnknownPatch(f"--patch {', '.join(unknown)}: no such patch; the patches are {', '.join(known)}")
    if unknown:  # the plugin is off (VERL_ASCEND=0): no records to name
        raise UnknownPatch(f"--patch {', '.join(unknown)}: the plugin is off here (VERL_ASCEND=0), no patch is loaded")


def _plugin_version() -> str:
    from verl_ascend import __version__

    return __version__


def render(report: dict) -> str:
    lines = []
    plugin = report["plugin"]
    if plugin["active"]:
        lines.append(f"verl-ascend {plugin['version']}: active (via {', '.join(plugin['sources'])})")
    else:
        lines.append(f"verl-ascend {plugin['version']}: OFF (VERL_ASCEND=0)")
    versions = ", ".join(f"{k} {v or '-'}" for k, v in report["versions"].items())
    lines.append(f"versions: {versions}")
    host = report["ascend_host"]
    lines.append(f"ascend host: {'yes (' + '; '.join(host) + ')' if host else 'no'}")
    if report.get("torch_import_error"):
        lines.append(f"import torch FAILED: {report['torch_import_error']}")
        lines.append(f"fix: {platform.CANN_FIX}")
        return "\n".join(lines)  # nothing below can be known without torch
    if report["verl_import_error"]:
        lines.append(f"import verl FAILED: {report['verl_import_error']}")
    verdict = report.get("verl_support")
    if verdict and not verdict["supported"]:
        lines.append(f"verl {verdict['verl']} is outside the supported range ({support.SUPPORTED}): {verdict['reason']}")
    stack = report.get("verl_stack")
    if stack:
        lines.append("verl's Ascend stack (its install guide): "
                     + ("as named" if not stack["departures"] else "departs: " + "; ".join(stack["departures"])))
    if report.get("megatron_path"):
        lines.append(f"megatron on npu: {megatron_path.summary(report['megatron_path'])}")
    device = report["device"]
    if device:
        answer = f"{device.get('device')} / {device.get('backend')}"
        lines.append(f"verl device: {answer}" + (f"  ({device['error']})" if device.get("error") else ""))
    lines.append("patches:")
    width = max([len(p["name"]) for p in report["patches"]] or [4])
    for patch in report["patches"]:
        lines.append(f"  {patch['name']:<{width}}  {_headline(patch)}")
        for row in patch["targets"]:
            where = row["target"] or "-"
            state = f"{row['state']}, {registry.INACTIVE}" if row.get("inactive") else row["state"]
            detail = "; ".join(x for x in (row["detail"], row.get("inactive")) if x)
            lines.append(f"  {'':<{width}}    {where}: {state}" + (f" ({detail})" if detail else ""))
    for target, error in report["target_import_errors"].items():
        lines.append(f"  could not import {target}: {error}")
    set_here = [row for row in report["settings"] if row["raw"] is not None]
    lines.append("settings:" + ("" if set_here else " all defaults (see `verl-ascend status --json`)"))
    for row in set_here:
        lines.append(f"  {row['name']}={row['raw']}" + (f"  PROBLEM: {row['problem']}" if row["problem"] else ""))
    return "\n".join(lines)


def _headline(patch: dict) -> str:
    """The state with the reason of the row that decided it, when there are several rows to pick from
    (a single row repeats it below; an applied patch's rows say what it changed)."""
    if patch.get("inactive"):  # the rows below say why: the wrapped call is not on verl's default path
        return f"{patch['state']}, {registry.INACTIVE}"
    several = len(patch.get("targets") or ()) > 1
    reason = patch.get("detail") if several and patch["state"] != registry.APPLIED else ""
    return f"{patch['state']} ({reason})" if reason else patch["state"]


def judge(report: dict) -> list:
    """What the exit code rests on: verl (or torch) not importing is an error, nothing of verl runs
    here; a patch that failed or was overridden, or an invalid setting, is a warning."""
    found = [Finding(ERROR, "import verl", report["verl_import_error"])] if report["verl_import_error"] else []
    found += [Finding(WARNING, f"patch {p['name']}", p["state"]) for p in report["patches"]
              if p["state"] in ("failed", "overridden")]
    found += [Finding(WARNING, row["name"], row["problem"]) for row in report["settings"] if row["problem"]]
    return found


def run(only=(), import_targets: bool = True, as_json: bool = False) -> int:
    """Print the report (text or JSON) and return the exit code."""
    # Imported packages may print (torch_npu warns about CANN on stdout): keep stdout for the report.
    with contextlib.redirect_stdout(sys.stderr):
        report = collect(import_targets=import_targets, only=only)
    found = judge(report)
    print(to_json("status", found, **report) if as_json else render(report))
    return exit_code(found)
