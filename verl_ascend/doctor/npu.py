"""NPUs seen by the driver (``npu-smi info``) and their device IPs (``/etc/hccn.conf``): group npu (with
:mod:`.board_probe`). Check ids and groups: :mod:`.checks`."""

import dataclasses
import ipaddress
import re
import shutil
import subprocess
from collections import defaultdict

from .findings import error, ok, skip, warn

NPU_SMI_TIMEOUT = 20  # seconds; a wedged driver makes npu-smi hang
_BUS_ID = re.compile(r"^[0-9a-fA-F]{4}:")
_USAGE = re.compile(r"(\d+)\s*/\s*(\d+)")


@dataclasses.dataclass(frozen=True)
class Die:
    """One rank's device: a whole card on A2/A5, one of the two dies of a card on A3."""

    npu: int              # NPU ID: the card, what `npu-smi -i` takes (0-7 on A3)
    chip: int             # chip (die) index inside the card: 0, or 0/1 on A3
    phy_id: int           # Phy-ID: the device index a rank uses (0-15 on A3); the NPU ID on A2
    name: str
    health: str
    hbm_mb: "int | None"  # HBM total of this chip, from `HBM-Usage(MB)` "used / total"

    @property
    def label(self) -> str:
        return f"NPU {self.npu} chip {self.chip} / Phy-ID {self.phy_id}" if self.chip or self.phy_id != self.npu \
            else f"NPU {self.npu}"


def _cells(line: str) -> list:
    line = line.strip()
    if not line.startswith("|"):
        return []
    return [c.strip() for c in line.strip("|").split("|")]


def parse_dies(text: str) -> tuple:
    """(layout, [Die]) from `npu-smi info`.

    Each device is two rows: "| NPU  Name | Health | Power ..." then "| Chip [Phy-ID] | Bus-Id | ... HBM used / total".
    An A3 (910C) table says `Chip  Phy-ID` in its header and shows two chip blocks per NPU ID, the second
    with Power `-` (real outputs: vllm-ascend#2035, #2534, #12980; UCM#748). The process table that follows
    ("| NPU Chip | Process id | ...") is not read: its rows would look like devices.
    """
    phy_header, dies, card = False, [], None
    for line in text.splitlines():
        cells = _cells(line)
        if len(cells) < 3:
            continue
        if "Process id" in line or "Process name" in line:
            break
        head = cells[0].split()
        if head[:2] == ["Chip", "Phy-ID"]:
            phy_header = True
        if not head or not head[0].isdigit():
            continue
        if _BUS_ID.match(cells[1]):
            if card is None:
                continue
            chip = int(head[0])
            phy = int(head[1]) if len(head) > 1 and head[1].isdigit() else card[0]
            usage = _USAGE.findall(cells[2])
            hbm = int(usage[-1][1]) if usage else None
            dies.append(Die(card[0], chip, phy, card[1], card[2], hbm))
            card = None
        elif len(head) > 1:
            card = (int(head[0]), " ".join(head[1:]), cells[1])
    per_card = defaultdict(int)
    for d in dies:
        per_card[d.npu] += 1
    layout = "a3" if phy_header or any(n > 1 for n in per_card.values()) else "a2"
    return layout, dies


def parse_npu_smi(text: str) -> list:
    """[(npu id, name, health)], one per device (per die on A3)."""
    return [(d.npu, d.name, d.health) for d in parse_dies(text)[1]]


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


def run_chip_map():
    """Output of `npu-smi info -m` (chip map), or None when it is not available."""
    exe = shutil.which("npu-smi")
    if not exe:
        return None
    try:
        proc = subprocess.run([exe, "info", "-m"], capture_output=True, text=True, timeout=NPU_SMI_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    return proc.stdout if proc.returncode == 0 else None


def layout_from_chip_map(text) -> str | None:
    """"a5" when `npu-smi info -m` has the Ascend 950 columns `Slot ID` and `Chip Phy-ID` (SwanHubX/SwanLab#1719),
    "a3" when a chip is named `Ascend 910_93xx`; None otherwise (A2, or no map)."""
    if not text:
        return None
    header = next((line for line in text.splitlines() if "NPU ID" in line), "")
    if "Slot ID" in header and "Chip Phy-ID" in header:
        return "a5"
    return "a3" if re.search(r"910_93\d\d", text) else None


def node_profile(layout: str, dies) -> str:
    """Profile name (verl_ascend.core.profiles) for what npu-smi shows: a 32 GB A2 part is a2-32g."""
    if layout == "a2" and dies and all(d.hbm_mb and d.hbm_mb <= 32768 for d in dies):
        return "a2-32g"
    return layout


def _hbm(dies, word) -> str:
    sizes = sorted({d.hbm_mb for d in dies if d.hbm_mb})
    if not sizes:
        return "HBM size not shown"
    return f"{' / '.join(map(str, sizes))} MB HBM per {word}"


def _read_smi(result, chip_map_layout):
    """(dies, profile, problem finding) of an `npu-smi info` result: problem is the npu.devices
    finding when there is nothing to judge (no npu-smi, it failed, it lists no NPU)."""
    from ..core.profiles import PROFILES

    if result is None:
        return None, None, skip(check_devices, "npu-smi is not on PATH: device count and health not checked "
                                "(no NPU driver here)", "on an Ascend node, add /usr/local/sbin (or the driver's tools dir) to PATH")
    code, text = result
    if code != 0:
        first = (text.strip().splitlines() or ["no output"])[-1]
        return None, None, error(check_devices, f"`npu-smi info` failed (exit {code}): {first}",
                                 "check the NPU driver (`lsmod | grep drv_davinci`, dmesg) and that the container sees /dev/davinci*")
    layout, dies = parse_dies(text)
    if not dies:
        return None, None, error(check_devices, "`npu-smi info` lists no NPU",
                                 "check the driver install and the container's device mounts")
    return dies, PROFILES[node_profile(chip_map_layout or layout, dies)], None


def check_devices(result, expected=None, chip_map_layout=None) -> list:
    """Rank devices and HBM. `expected`: ranks per node asked for (None: the profile's)."""
    dies, profile, problem = _read_smi(result, chip_map_layout)
    if problem:
        return [problem]
    word = profile.rank_word
    names = ", ".join(sorted({d.name for d in dies}))
    cards = len({d.npu for d in dies})
    shape = f" dies ({cards} cards x {len(dies) // cards}), one rank each" if word == "die" else ""
    summary = f"{len(dies)} NPU{shape}: {names}, {_hbm(dies, word)}"
    want = expected or profile.ranks_per_node
    if len(dies) != want:
        source = "--npus-per-node" if expected else f"a full {profile.name} node"
        return [warn(check_devices, f"{summary}; {source} has {want}",
                     "check the container's device mounts (--device /dev/davinciN) or pass --npus-per-node")]
    return [ok(check_devices, summary)]


def check_platform(result, chip_map_layout=None) -> list:
    dies, profile, problem = _read_smi(result, chip_map_layout)
    if problem:
        return []  # npu.devices says why
    return [ok(check_platform, f"{profile.name}: {profile.title} (from npu-smi); a rank is one {profile.rank_word}; "
               f"plan with `verl-ascend check --device {profile.name}`")]


def check_health(result, chip_map_layout=None) -> list:
    dies, profile, problem = _read_smi(result, chip_map_layout)
    if problem:
        return []  # npu.devices says why
    bad = [f"{d.label} ({d.health})" for d in dies if d.health.upper() != "OK"]
    if bad:
        return [error(check_health, f"unhealthy: {', '.join(bad)}",
                      "see `npu-smi info -t health -i <NPU> -c <chip>`; reset or replace the card before training")]
    return [ok(check_health, f"all {len(dies)} {profile.rank_word}s report health OK")]


def check_npu_smi(result, expected=None, chip_map_layout=None) -> list:
    """The three npu-smi checks above, in the table's order."""
    return (check_devices(result, expected, chip_map_layout) + check_platform(result, chip_map_layout)
            + check_health(result, chip_map_layout))


def ranks_and_profile(result, chip_map_layout=None):
    """(rank count, profile name) of a successful `npu-smi info`, else (None, None)."""
    if not result or result[0] != 0:
        return None, None
    layout, dies = parse_dies(result[1])
    if not dies:
        return None, None
    return len(dies), node_profile(chip_map_layout or layout, dies)


def parse_hccn_conf(text: str, key: str = "address"):
    """({device id: value}, [unparsable lines]) from hccn.conf's `address_N=IP` (or `netmask_N=MASK`) lines."""
    addresses, bad = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            bad.append(f"line {number}: {line!r}")
            continue
        m = re.fullmatch(rf"{key}_(\d+)", name.strip())
        if m:
            addresses[int(m.group(1))] = value.strip()
    return addresses, bad


def same_subnet_dies(addresses, netmasks) -> tuple:
    """([(2k, 2k+1, subnet)] where both dies of one A3 card share a subnet, [device ids without a netmask]).

    MindCluster's deployer guide: the two chips of one NPU need IPs in different subnets, else HCCN
    ping between them fails. Dies 2k and 2k+1 are the two chips of card k."""
    clashes, no_mask = [], []
    for dev in sorted(addresses):
        if dev % 2 or dev + 1 not in addresses:
            continue
        pair = (dev, dev + 1)
        missing = [d for d in pair if d not in netmasks]
        if missing:
            no_mask += missing
            continue
        try:
            nets = [ipaddress.ip_network(f"{addresses[d]}/{netmasks[d]}", strict=False) for d in pair]
        except ValueError:
            continue  # reported as a bad address / mask elsewhere
        if nets[0].overlaps(nets[1]):
            clashes.append((dev, dev + 1, str(nets[0])))
    return clashes, no_mask


def check_hccn_conf(path, text, npu_count=None, ascend_host=False, profile=None) -> list:
    check = check_hccn_conf
    if text is None:
        if ascend_host:
            return [warn(check, f"{path} not found: device (RoCE) IPs are not configured, multi-node HCCL cannot connect",
                         "configure each card with `hccn_tool -i N -ip -s address IP netmask MASK` (docs/field-reports.md: HCCL error code 4)")]
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
    if profile == "a3" and not invalid:
        clashes, no_mask = same_subnet_dies(addresses, parse_hccn_conf(text, "netmask")[0])
        if clashes:
            shown = "; ".join(f"dies {a} and {b} in {net}" for a, b, net in clashes)
            findings.append(error(check, f"{path}: the two dies of one A3 card share a subnet: {shown}",
                                  "give die 2k and die 2k+1 addresses in different subnets "
                                  "(`hccn_tool -i N -ip -s address IP netmask MASK`; MindCluster deployer guide)"))
        if no_mask:
            findings.append(warn(check, f"{path}: no netmask for device(s) {', '.join(map(str, no_mask))}: "
                                 "the A3 rule (two dies of a card in different subnets) cannot be checked",
                                 "set each die's netmask with `hccn_tool -i N -ip -s address IP netmask MASK`"))
    if bad:
        findings.append(warn(check, f"{path}: unparsable {', '.join(bad[:3])}", "each line is key=value"))
    if not findings:
        ips = ", ".join(addresses[d] for d in sorted(addresses))
        pairs = "; the two dies of each card in different subnets" if profile == "a3" else ""
        findings.append(ok(check, f"{len(addresses)} distinct device IPs{pairs}: {ips}; also check they are unique across "
                           "nodes and reachable (`hccn_tool -i N -netdetect -s address PEER`)"))
    return findings
