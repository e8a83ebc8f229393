"""The Ray cluster of a multi-node rehearsal (``rehearse --nnodes N``), on this machine, for one trainer run.

``python -m verl_ascend.rehearse.run.cluster SPEC.json -- TRAINER ARGV...`` runs as the first process of the
run's PID namespace (:mod:`.runner` puts it there): when it ends, for any reason, the kernel ends every node
with it. It starts the nodes, waits for them, runs the trainer against them and exits with its code.

A node here is what a cluster node is to verl and Ray:

- its own address: the head on this machine's, worker node k on 127.A.B.(k+1) (``ray start --node-ip-address``;
  A.B drawn per rehearsal, so two rehearsals on one host never share a node address);
- its own disks: a mount namespace of its own (util-linux ``unshare --mount --propagation private``) in which
  the node's folder is bind-mounted over the checkpoint folder (``trainer.default_local_dir``) and over Ray's
  temp folder. Every node sees the same absolute paths, as on a cluster, and none sees another node's files;
  from outside, node k's files are in ``NODES_DIR/node<k>/`` (which is how the rehearsal lists them);
- its own environment: the node's ``ray start`` gets the machine's environment without any ``VERL_ASCEND*``
  setting of the launch (as a node started by ``ray_start_worker.sh`` has), so a setting reaches a worker of
  another node only the way it does on a cluster: in the job's runtime env (the ``ray_runtime_env`` patch);
  worker node k's has ``runlog.NODE_VAR=k``, which its processes inherit: the nodes share this host's ``/proc``,
  and that is how ``supervise``'s evidence tells node k's processes from the others' (a cluster node sees only
  its own);
- the flags of ``recipes/ray_start_head.sh`` / ``ray_start_worker.sh`` (head port, ``--resources`` with the
  node's ``NPU`` count), plus what a CPU rehearsal needs: GPU as the logical resource verl's CPU platform asks
  for, no dashboard, ports found free here (two rehearsals on one host must not collide), ``--block`` so the
  node lives exactly as long as this process holds it.

The trainer (the driver) runs in the head node's view, with ``RAY_ADDRESS`` naming the head. ``--fault
worker-node`` ends every process of the last worker node (its raylet, its agents, its workers: everything in its
mount namespace) once the trainer's output shows the loop's first rollout (under ``rehearse --supervise``: verl's
line of step N, ``worker-node@after-step-N``), as a node that loses power would.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from verl_ascend.core import runlog
from verl_ascend.proc.namespace import namespace_of
from verl_ascend.rehearse.run.nodes import binds, node_ip, node_name

WORKER_PORTS = 48  # Ray workers a node may start (the run needs ~10 per node)
NODE_WAIT = 300  # seconds for every node to register with the head (a loaded 2-core host: ~10-40 s)
FAULT_TRIGGER = runlog.DISPATCH  # the TaskRunner's first-dispatch line (loop/report.py): the loop is mid-step
AFTER_STEP = "after-step-"  # rehearse --supervise: worker-node@after-step-N, the node dies once step N is saved
OWN_ERROR = runlog.OWN_ERROR


def say(text: str) -> None:
    """A line of the rehearsal's own in the run's console, in the words the loop's processes use."""
    print(f"{runlog.PREFIX} {text}", flush=True)


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(ip: str, count: int) -> list:
    """``count`` ports free on ``ip`` now, below the kernel's ephemeral range and above Ray's default worker ports
    (10002-19999): a port the kernel hands to someone's bind(0) (verl's MASTER_PORT, another run's) between this
    pick and Ray's bind would fail the run (measured: EADDRINUSE in torch's TCPStore with three rehearsals at once).
    The tests' own listeners take theirs here too (tests/subproc.py)."""
    import random

    low, high = 20000, max(20000 + 4 * count, _ephemeral_start())
    found = []
    for port in random.sample(range(low, high), min(high - low, 40 * count)):
        with socket.socket() as sock:
            try:
                sock.bind((ip, port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"no {count} free ports between {low} and {high} on {ip}")


def _ray() -> list:
    return [sys.executable, "-m", "ray.scripts.scripts"]


def start_argv(index: int, spec: dict, head_ip: str, head_port: int) -> list:
    """The node's ``ray start`` command (see the module docstring for where each flag comes from)."""
    ip, per_node = node_ip(index, head_ip, spec["subnet"]), spec["gpus_per_node"]
    ports = free_ports(ip, 7 + WORKER_PORTS)
    argv = _ray() + ["start", "--block", "--node-ip-address", ip, "--num-cpus", str(spec["cpus_per_node"]),
                     "--num-gpus", str(per_node), "--resources", json.dumps({"NPU": per_node}),
                     "--disable-usage-stats",
                     "--node-manager-port", str(ports[0]), "--object-manager-port", str(ports[1]),
                     "--runtime-env-agent-port", str(ports[2]), "--dashboard-agent-listen-port", str(ports[3]),
                     "--dashboard-agent-grpc-port", str(ports[4]), "--metrics-export-port", str(ports[5]),
                     "--worker-port-list", ",".join(map(str, ports[7:])),
                     "--object-store-memory", str(spec.get("object_store_bytes", 256 << 20))]
    if index == 0:
        argv += ["--head", "--port", str(head_port), "--ray-client-server-port", str(ports[6]),
                 "--temp-dir", spec["ray_tmp"], "--include-dashboard=false"]
    else:
        argv += ["--address", f"{head_ip}:{head_port}"]
    return argv


def in_node_view(index: int, spec: dict, argv: list) -> list:
    """``argv`` run in a mount namespace of its own where node ``index``'s folders cover the node-local paths."""
    import shlex

    script = " && ".join([shlex.join(cmd) for cmd in binds(index, spec)] + ['exec "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "node", *argv]


def processes_in_mount_namespace(namespace: str) -> list:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and namespace_of(int(e.name), "mnt") == namespace]


def _last_words(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return f"(no {log.name})"
    return " / ".join(lines[-3:])[-600:]


def wait_for_nodes(address: str, count: int, gpus_per_node: int, procs: list, log_dir: str,
                   timeout: float = NODE_WAIT) -> dict:
    """Wait, as recipes/ray_wait.sh does, until the cluster has every node's NPUs; return {node ip: resources}."""
    import ray

    deadline = time.monotonic() + timeout
    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    try:
        while True:
            alive = {n["NodeManagerAddress"]: n["Resources"] for n in ray.nodes() if n.get("Alive")}
            npus = sum(int(r.get("NPU", 0)) for r in alive.values())
            if npus >= count * gpus_per_node:
                return alive
            dead = [i for i, proc in enumerate(procs) if proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = (f"{', '.join(node_name(i) for i in dead)} exited: " + " | ".join(
                    _last_words(Path(log_dir) / f"ray_start_node{i}.log") for i in dead)) if dead else \
                    f"not within {timeout:.0f} s"
                raise RuntimeError(f"the rehearsal's Ray cluster did not come up ({why}): {npus} NPU of "
                                   f"{count * gpus_per_node} registered, nodes {sorted(alive)}")
            time.sleep(1)
    finally:
        ray.shutdown()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv or argv.index("--") != 1:
        print("usage: python -m verl_ascend.rehearse.run.cluster SPEC.json -- TRAINER ARGV...", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    trainer = argv[2:]
    count = spec["nnodes"]
    if os.environ.get("RAY_AUTH_TOKEN"):  # the run's own token (rehearsal.child_env): `ray start` needs the mode said
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    node_env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_ASCEND") or k in spec["node_keeps"]}
    # this process is the head node: the run's PID namespace came with a mount namespace of its own (runner.py's
    # unshare --mount-proc), in which the head's folders are bound here; the head's ray start, the wait below and
    # the trainer inherit that view, and each worker node makes its own from it
    for cmd in binds(0, spec):
        subprocess.run(cmd, check=True)
    head_ip = spec["head_ip"]  # this machine's address as Ray sees it (multinode.prepare asked Ray once)
    head_port = free_ports(head_ip, 1)[0]
    address = f"{head_ip}:{head_port}"
    procs = []
    for index in range(count):
        log = open(Path(spec["log_dir"]) / f"ray_start_node{index}.log", "w")
        start = start_argv(index, spec, head_ip, head_port)
        # a worker node's processes carry its index: this host's /proc shows every node's, a cluster node's its own
        env = {**node_env, runlog.NODE_VAR: str(index)} if index else node_env
        procs.append(subprocess.Popen(in_node_view(index, spec, start) if index else start, env=env,
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
        if index == 0:
            time.sleep(1)  # the workers' ray start retries until the head's GCS answers
    try:
        nodes = wait_for_nodes(address, count, spec["gpus_per_node"], procs, spec["log_dir"])
    except Exception as exc:
        print(f"RuntimeError: {exc}", flush=True)
        return 1
    for index in range(count):
        ip = node_ip(index, head_ip, spec["subnet"])
        say(f"node {index} ({node_name(index)}) at {ip}: Ray node up, {int(nodes.get(ip, {}).get('NPU', 0))} NPU, its own disk for "
            f"{', '.join(spec['node_local'])} ({Path(spec['nodes_dir']) / f'node{index}'})")
    env = {**os.environ, "RAY_ADDRESS": address}
    driver = subprocess.Popen(trainer, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    # the fault: the rehearsal's (--fault), or an attempt's own under rehearse --supervise (its first only)
    asked, trigger = fault_asked(spec, os.environ)
    fault = Fault(count - 1, procs[count - 1], node_ip(count - 1, head_ip, spec["subnet"]), driver, trigger) \
        if asked == "worker-node" and count > 1 else None
    for line in driver.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if fault is not None:
            fault.saw(line)
    code = driver.wait()
    if fault is not None and fault.killed is not None:
        with fault.lock:
            if not fault.verdict:
                fault.judge(ended=False)
    code, verdict = outcome(asked, fault, code, count)
    if verdict:
        print(f"{OWN_ERROR}{verdict}", flush=True)
    return code


def fault_asked(spec: dict, environ) -> tuple:
    """(the fault asked for or '', the console text that fires it). The rehearsal's ``--fault worker-node`` strikes
    at the loop's first rollout; an attempt's ``worker-node@after-step-N`` (rehearse --supervise) at verl's step line
    of step N, whose checkpoint is saved by then (verl saves before it logs the step): the node dies as step N+1
    begins, and the relaunch has a checkpoint split across the nodes to sync and resume from."""
    if spec.get("fault"):
        return spec["fault"], FAULT_TRIGGER
    kind, _, when = environ.get(runlog.FAULT_VAR, "").partition("@")
    if kind != "worker-node":
        return "", FAULT_TRIGGER
    return kind, (f"step:{when[len(AFTER_STEP):]} - " if when.startswith(AFTER_STEP) else FAULT_TRIGGER)


def outcome(asked: str, fault, code: int, count: int) -> tuple:
    """(exit code, the rehearsal's own verdict or '') of a trainer run that ended with ``code``.

    A planted fault makes the run fail with the fault's verdict. A fault asked for that never fired fails it too,
    naming the fault and why: an "ok" from such a run would claim a recovery nothing tested."""
    if fault is not None and fault.killed is not None:
        return 1, fault.verdict
    if asked:
        why = (f"the trainer's output never showed {fault.trigger.strip()!r}, which "
               f"plants it; the trainer exited {code}" if fault is not None else
               f"it needs a worker node, and this cluster has {count} node(s)")
        return 1, f"the planted fault --fault {asked} never fired: {why}"
    return code, ""


class Fault:
    """``--fault worker-node``: the node loses power at the loop's first rollout; the run is then watched.

    Ray marks the node dead once its GCS health check failed 5 times (14 s after the kill, measured), and every actor
    there is gone. verl 0.9's loop need not fail for that: on its TransferQueue path it keeps retrying a put to the
    dead storage unit (3 tries of 200 s in this project's run). A rehearsal does not wait that out: ``GRACE``
    seconds after Ray's verdict (or ``NO_VERDICT`` after the kill without one) a trainer still running is ended,
    and the verdict names the node, the time it died and what died there.
    """

    GRACE = 30
    NO_VERDICT = 120

    def __init__(self, index, node_proc, ip, driver, trigger=FAULT_TRIGGER):
        self.index, self.node_proc, self.ip, self.driver, self.trigger = index, node_proc, ip, driver, trigger
        self.killed, self.dead_at, self.verdict = None, None, ""
        self.lock = threading.Lock()

    def saw(self, line: str) -> None:
        if self.killed is None and self.trigger in line:
            self.killed = kill_node(self.index, self.node_proc, self.ip)
            threading.Thread(target=self._watch, daemon=True).start()
        elif self.killed is not None and self.dead_at is None and "has been marked dead" in line and self.ip in line:
            self.dead_at = time.monotonic()

    def _watch(self) -> None:
        started = time.monotonic()
        while self.driver.poll() is None:
            now = time.monotonic()
            if (self.dead_at and now - self.dead_at > self.GRACE) or (not self.dead_at and now - started > self.NO_VERDICT):
                break
            time.sleep(1)
        else:
            return  # the trainer failed by itself: main() judges
        with self.lock:
            self.judge(ended=True)
        try:
            os.killpg(self.driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def judge(self, ended: bool) -> None:
        ray_said = (f"Ray marked it dead {self.dead_at - self.killed.at:.0f} s later; " if self.dead_at
                    else f"Ray had not marked it dead {self.NO_VERDICT} s later; " if ended else "")
        tail = (f"the trainer was still running {self.GRACE} s after that, so the rehearsal ended it (on a cluster "
                "it would wait on)" if ended else "the trainer failed on it")
        self.verdict = (f"node {self.index} (worker node {self.index}, {self.ip}) {runlog.NODE_DIED}: it lost power at "
                        f"{self.killed.wall}; {ray_said}its processes died with it: {self.killed.died}; {tail}")


def _name(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    first = argv[0].decode(errors="replace")
    if first.startswith("ray::"):
        return first[5:].split(".")[0].split(" ")[0] or "idle worker"
    words = [Path(a.decode(errors="replace")).name for a in argv[:3] if a]
    for known in ("raylet", "gcs_server", "dashboard", "agent", "log_monitor", "runtime_env", "ray.scripts.scripts"):
        if any(known in w for w in words):
            return "ray start" if known == "ray.scripts.scripts" else known
    return words[0] if words else "?"


class Killed(NamedTuple):
    at: float   # time.monotonic() of the kill
    died: str   # what died, by process name
    wall: str   # the kill's wall-clock time as logs write it: the verdict states it so that `diagnose` places the
                # node's death where it happened, before the errors of the processes that called into it


def kill_node(index: int, proc, ip: str) -> Killed:
    """Every process of node ``index`` (its mount namespace), at once, as a power loss would."""
    import collections
    import datetime

    namespace = namespace_of(proc.pid, "mnt")
    pids = [pid for pid in processes_in_mount_namespace(namespace) if pid != os.getpid()] if namespace else []
    names = collections.Counter(_name(pid) for pid in pids)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    died = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(names.items()))
    say(f"{runlog.FAULT_PLANTED}node {index} (worker node {index}, {ip}) lost power: {len(pids)} process(es) killed: {died}")
    return Killed(time.monotonic(), died, datetime.datetime.now().isoformat(sep=" ", timespec="milliseconds"))


if __name__ == "__main__":
    sys.exit(main())
