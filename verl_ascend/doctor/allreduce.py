"""An all-reduce smoke test, run under torchrun on one node or many (the test that located the
HCCL fault in docs/field-reports.md#32b-hccl-error-code-4).

Every rank contributes ``rank + 1``; the sum must be ``W (W + 1) / 2``. On NPU it runs HCCL and,
like verl, a Gloo group beside it (with only HCCL_SOCKET_IFNAME set, Gloo's connectFullMesh
failed: docs/field-reports.md#32b-hccl-error-code-9-and-gloo); on CPU it runs Gloo. Each rank
prints one line; a failure prints the phase it happened in and what usually causes it there.
Everything is bounded: the process-group timeout, and a watchdog that ends the rank if a call
ignores that timeout.

    torchrun --nnodes 2 --node_rank N --nproc_per_node 8 --master_addr HEAD --master_port 29500 \\
        scripts/hccl_check.py
"""

import argparse
import datetime
import os
import socket
import sys
import threading
import time

from verl_ascend.core.findings import lines

from . import network

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def diagnose(phase: str, text: str, env, timeout: float) -> str:
    """What a failure in this phase, with this message, usually means, and what to do."""
    master = f"{env.get('MASTER_ADDR')}:{env.get('MASTER_PORT')}"
    low = text.lower()
    if "connectfullmesh" in low:
        return ("Gloo could not connect all ranks: GLOO_SOCKET_IFNAME is unset or names another interface than "
                "HCCL_SOCKET_IFNAME (docs/field-reports.md). " + network.FIX_PAIR)
    if "error code is 4" in low or "error code is 9" in low or "ei0006" in low:
        return ("HCCL could not build its communicator: device IPs not mutually reachable or the host interface "
                "is wrong (docs/field-reports.md: codes 4 and 9). Check /etc/hccn.conf and `hccn_tool -i N -link -g`, "
                "`-tls -g`, `-net_health -g` on every node; " + network.FIX_PAIR)
    if phase == "rendezvous" and ("refused" in low or "trying to connect" in low or "failed to connect" in low
                                   or "name or service" in low or "no route" in low):
        return (f"cannot reach the rendezvous store at {master}: is rank 0's node up, and are --master_addr / "
                "--master_port the same on every node and the port open between nodes?")
    if low.startswith("mismatch"):
        return ("the collective completed but returned a wrong sum: run `npu-smi info` (health) on every node, "
                "then this check per node to find the card")
    if "timed out" in low or "timeout" in low or phase.startswith("stuck"):
        return (f"timeout after {timeout:.0f} s in {phase.replace('stuck in ', '')}: not every one of the "
                f"{env.get('WORLD_SIZE')} ranks arrived. Start torchrun on every node with the same --nnodes, "
                f"--master_addr and --master_port ({master}); check the interface variables above and raise "
                "HCCL_CONNECT_TIMEOUT if nodes start minutes apart")
    return f"{phase} failed; see the error above"


def mismatch(got, expected: float) -> str:
    """'' when every element of the reduced tensor equals the expected sum, else what differs."""
    wrong = got[got != expected]
    if wrong.numel() == 0:
        return ""
    return (f"mismatch: {wrong.numel()} of {got.numel()} elements differ from the expected sum {expected:g} "
            f"(e.g. {wrong[0].item():g}): a device or link corrupts data, or ranks ran different code")


class Rank:
    def __init__(self, env, timeout):
        self.env = env
        self.timeout = timeout
        self.rank, self.world = int(env["RANK"]), int(env["WORLD_SIZE"])
        self.local = int(env["LOCAL_RANK"])
        self.tag = f"hccl_check rank {self.rank}/{self.world} ({socket.gethostname()}, local {self.local})"
        self.phase = "start"

    @property
    def phase(self):
        return self._phase

    @phase.setter
    def phase(self, name):
        self._phase, self.phase_started = name, time.monotonic()

    def say(self, text):
        sys.stdout.write(f"{self.tag}: {text}\n")  # one write per line: ranks share the terminal
        sys.stdout.flush()

    def fail(self, text):
        self.say(f"FAILED in {self.phase} after {time.monotonic() - self.phase_started:.1f} s: {text}")
        self.say(f"diagnosis: {diagnose(self.phase, text, self.env, self.timeout)}")
        return 1


def _interface_report(env) -> list:
    nnodes = max(1, int(env["WORLD_SIZE"]) // max(1, int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"]))))
    ifaces = network.local_interfaces()
    return network.check_socket_ifnames(env, ifaces, nnodes) + network.check_if_ip(env, ifaces)


def _choose_backend(requested: str):
    """(backend, device, problem)."""
    from verl_ascend.core import platform

    if requested == "gloo" or (requested == "auto" and not platform.is_ascend_host()):
        return "gloo", "cpu", ""
    problem = platform.torch_npu_error()
    if problem:
        return "hccl", "npu", f"torch_npu cannot be used ({problem}). Fix: {platform.CANN_FIX}"
    return "hccl", "npu", ""


def _watchdog(me: Rank, margin: float):
    def fire():
        me.say(f"FAILED: no progress for {me.timeout + margin:.0f} s ({me.phase})")
        me.say(f"diagnosis: {diagnose('stuck in ' + me.phase, '', me.env, me.timeout)}")
        os._exit(1)  # a collective that ignores its timeout cannot be interrupted any other way

    timer = threading.Timer(me.timeout + margin, fire)
    timer.daemon = True
    timer.start()
    return timer


def run(args, env) -> int:
    missing = [v for v in TORCHRUN_VARS if v not in env]
    if missing:
        print(f"hccl_check: {', '.join(missing)} not set: run it under torchrun, e.g. "
              "`torchrun --nproc_per_node 8 scripts/hccl_check.py` (add --nnodes/--node_rank/--master_addr/"
              "--master_port on several nodes)", file=sys.stderr)
        return 2
    me = Rank(env, args.timeout)
    if me.local == 0:  # once per node: the checks doctor runs, before anything can hang
        for line in lines(_interface_report(env)):
            me.say(line)
    backend, device, problem = _choose_backend(args.backend)
    if problem:
        return me.fail(problem)
    import torch.distributed  # noqa: F401  (before the watchdog: a slow import on a busy node is no hang)

    timer = _watchdog(me, margin=30)
    try:
        return _collectives(me, backend, device, args)
    except Exception as exc:  # every failure becomes a diagnosis line, not a traceback wall
        return me.fail(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
    finally:
        timer.cancel()


def _collectives(me: Rank, backend: str, device: str, args) -> int:
    import torch
    import torch.distributed as dist

    if device == "npu":
        import torch_npu  # noqa: F401

        torch.npu.set_device(me.local)
    me.phase = "rendezvous"
    dist.init_process_group(backend=backend, rank=me.rank, world_size=me.world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        groups = [(backend, None, device)]
        if backend != "gloo":
            me.phase = "gloo group creation"
            groups.append(("gloo", dist.new_group(backend="gloo"), "cpu"))
        expected = me.world * (me.world + 1) / 2
        for name, group, dev in groups:
            me.phase = f"{name} all_reduce"
            tensor = torch.full((args.numel,), float(me.rank + 1), dtype=torch.float32, device=dev)
            start = time.perf_counter()
            dist.all_reduce(tensor, group=group)
            got = tensor.cpu()
            elapsed = (time.perf_counter() - start) * 1000
            problem = mismatch(got, expected)
            if problem:
                me.phase = f"{name} result check"
                return me.fail(problem)
            me.say(f"{name} all_reduce OK on {dev}: sum {expected:g} over {args.numel} elements in {elapsed:.1f} ms")
        me.phase = "final barrier"
        dist.barrier(group=groups[-1][1])
        if me.rank == 0:
            me.say(f"all {me.world} ranks passed ({', '.join(g[0] for g in groups)})")
        return 0
    finally:
        dist.destroy_process_group()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="hccl_check.py",
        description="All-reduce smoke test for one or many nodes, run under torchrun: HCCL on NPU (plus a "
        "Gloo group, as verl uses both), Gloo on CPU. Prints each rank's result, and on failure the phase "
        "and the likely cause (timeout, unreachable master, interface mismatch, wrong sum). Exit 0 pass, "
        "1 failure, 2 not started by torchrun.",
    )
    parser.add_argument("--backend", choices=("auto", "hccl", "gloo"), default="auto",
                        help="auto: hccl on an Ascend node, gloo otherwise")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S",
                        help="seconds any rendezvous or collective may take (default 120, HCCL's connect default)")
    parser.add_argument("--numel", type=int, default=1 << 20, help="elements per rank (default 1M float32)")
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.numel <= 0:
        parser.error("--timeout and --numel must be positive")
    return run(args, dict(os.environ))
