"""What reached each node of a multi-node rehearsal, as the loop's processes said it.

Each process of the loop says its node, device, platform and ``VERL_ASCEND*`` settings (``loop/report.py``,
in the words of ``core.runlog.NODE_LINE``); every node must hold the driver's settings, which only the job's
runtime env carries to a worker node.
"""

from verl_ascend.core.runlog import NODE_LINE


def per_node(said: list) -> dict:
    """{node address: {role: (device, platform, settings dict)}} from the loop's own lines."""
    nodes = {}
    for line in said:
        match = NODE_LINE.match(line)
        if match:
            ip, role, device, platform, settings = match.groups()
            pairs = dict(item.split("=", 1) for item in settings.split() if "=" in item)
            nodes.setdefault(ip, {})[role] = (device, platform, pairs)
    return nodes


def settings_crossed(said: list, driver: dict, hosts: list) -> tuple:
    """(ok, lines): every node reported a process, and each holds exactly the driver's VERL_ASCEND* settings; under
    each process, the patch states it reported (loop.report.say_patches_once says both, one after the other)."""
    nodes, lines, ok = per_node(said), [], True
    # "patches in <role>: ..." (the runner leaves the pid out); a role is one process per run (actor rank k, the
    # TaskRunner), and the rehearsal keeps each distinct line once, so a role's states are the same on every node
    patches = dict(line[len("patches in "):].split(": ", 1) for line in said
                   if line.startswith("patches in ") and ": " in line)
    for index, host in enumerate(hosts):
        roles = nodes.get(host, {})
        if not roles:
            ok = False
            lines.append(f"FAIL node {index} ({host}): no process of the loop reported from it")
            continue
        for role, (device, platform, settings) in sorted(roles.items()):
            differ = sorted(k for k in set(settings) | set(driver) if settings.get(k) != driver.get(k))
            ok = ok and not differ
            lines.append(f"{'ok  ' if not differ else 'FAIL'} node {index} ({host}) {role}: device {device}, platform "
                         f"{platform}, {len(settings)} VERL_ASCEND* setting(s)"
                         + (f" differ from the driver's: {', '.join(differ)}" if differ else " = the driver's"))
            if role in patches:
                lines.append(f"       patches there: {patches[role]}")
    return ok, lines
