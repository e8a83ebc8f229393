"""NPUs seen by the driver (``npu-smi info``) and their device IPs (``/etc/hccn.conf``)."""

import ipaddress
import re
import shutil
import subprocess
from collections import defaultdict

from .findings import error, ok, skip, warn

NPU_SMI_TIMEOUT = 20  # seconds; a wedged driver makes npu-smi hang
# A card's first row in the `npu-smi info` table: "| 0     910B2   | OK   | ..."
_CARD_ROW = re.compile(r"^\|\s*(\d+)\s+([^|\s][^|]*?)\s*\|\s*([^|]+?)\s*\|")


def parse_npu_smi(text: str) -> list:
    """[(npu id, name, health)] from the card rows of `npu-smi info` (chip rows have a bus id)."""
    cards = []
    for line in text.splitlines():
        m = _CARD_ROW.match(line.strip())
        if m and not re.match(r"^[0-9a-fA-F]{4}:", m.group(3)):
            cards.append((int(m.group(1)), m.group(2).strip(), m.group(3).strip()))
    return cards


def run_npu_smi():
    """(exit code, output) of `npu-smi info`, or None when npu-smi is not on PATH."""
    exe = shutil.which("npu-smi")
    if not exe:
        return None
    try:
        proc = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=NPU_SMI_TIMEOUT)
    except subprocess.TimeoutExpired:
        return (-1, f"npu-smi info did not answer within {NPU_SMI_TIMEOUT} s")
    return (proc.returncode, proc.stdout + proc.stderr)


def check_npu_smi(result, expected=None) -> list:
    check = "npu.devices"
    if result is None:
        return [skip(check, "npu-smi is not on PATH: device count and health not checked (no NPU driver here)",
                     "on an Ascend node, add /usr/local/sbin (or the driver's tools dir) to PATH")]
    code, text = result
    if code != 0:
        first = (text.strip().splitlines() or ["no output"])[-1]
        return [error(check, f"`npu-smi info` failed (exit {code}): {first}",
                      "check the NPU driver (`lsmod | grep drv_davinci`, dmesg) and that the container sees /dev/davinci*")]
    cards = parse_npu_smi(text)
    if not cards:
        return [error(check, "`npu-smi info` lists no NPU", "check the driver install and the container's device mounts")]
    found = []
    bad = [f"NPU {i} ({health})" for i, _, health in cards if health.upper() != "OK"]
    names = sorted({name for _, name, _ in cards})
    if bad:
        found.append(error("npu.health", f"unhealthy: {', '.join(bad)}",
                           "see `npu-smi info -t health -i <id>`; reset or replace the card before training"))
    else:
        found.append(ok("npu.health", f"all {len(cards)} NPU report health OK"))
    if expected and len(cards) < expected:
        found.insert(0, warn(check, f"{len(cards)} NPU ({', '.join(names)}) but {expected} expected per node",
                             "check the container's device mounts (--device /dev/davinciN) or pass --npus-per-node"))
    else:
        found.insert(0, ok(check, f"{len(cards)} NPU: {', '.join(names)}"))
    return found


def parse_hccn_conf(text: str):
    """({device id: address}, [unparsable lines]) from hccn.conf's `address_N=IP` lines."""
    addresses, bad = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            bad.append(f"line {number}: {line!r}")
            continue
        m = re.fullmatch(r"address_(\d+)", key.strip())
        if m:
            addresses[int(m.group(1))] = value.strip()
    return addresses, bad


def check_hccn_conf(path, text, npu_count=None, ascend_host=False) -> list:
    check = "npu.hccn_conf"
    if text is None:
        if ascend_host:
            return [warn(check, f"{path} not found: device (RoCE) IPs are not configured, multi-node HCCL cannot connect",
                         "configure each card with `hccn_tool -i N -ip -s address IP netmask MASK` (seed 000)")]
        return [skip(check, f"{path} not found (not an Ascend node): device IPs not checked")]
    addresses, bad = parse_hccn_conf(text)
    if not addresses:
        return [error(check, f"{path} has no address_N entries", "set device IPs with `hccn_tool -i N -ip -s address ...`")]
    findings = []
    invalid = []
    for dev, addr in sorted(addresses.items()):
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            invalid.append(f"address_{dev}={addr!r}")
    by_ip = defaultdict(list)
    for dev, addr in addresses.items():
        by_ip[addr].append(dev)
    dups = {ip: devs for ip, devs in by_ip.items() if len(devs) > 1}
    if invalid:
        findings.append(error(check, f"{path}: not an IP address: {', '.join(invalid)}",
                              "fix the entry with `hccn_tool -i N -ip -s address IP netmask MASK`"))
    if dups:
        shown = "; ".join(f"{ip} on devices {', '.join(map(str, sorted(devs)))}" for ip, devs in sorted(dups.items()))
        findings.append(error(check, f"{path}: duplicate device IPs: {shown}",
                              "give every card a distinct IP (unique across all nodes) with `hccn_tool -i N -ip -s address ...`"))
    if npu_count and len(addresses) < npu_count:
        missing = sorted(set(range(npu_count)) - set(addresses))
        findings.append(warn(check, f"{path}: no address for device(s) {', '.join(map(str, missing))} of {npu_count}",
                             "configure the missing cards with `hccn_tool -i N -ip -s address ...`"))
    if bad:
        findings.append(warn(check, f"{path}: unparsable {', '.join(bad[:3])}", "each line is key=value"))
    if not findings:
        ips = ", ".join(addresses[d] for d in sorted(addresses))
        findings.append(ok(check, f"{len(addresses)} distinct device IPs: {ips}; also check they are unique across "
                           "nodes and reachable (`hccn_tool -i N -netdetect -s address PEER`)"))
    return findings
