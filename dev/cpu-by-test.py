#!/usr/bin/env python3
"""Where a command's CPU goes, per test: run COMMAND, sample every process of the machine, and charge each one's
CPU-seconds to the pytest test named in its environment.

    python3 dev/cpu-by-test.py --out cpu.json -- .ci/run
    python3 dev/cpu-by-test.py --report cpu.json [--by file|test|env] [--top N]

Why sampling: `time` and getrusage count a process only when an ancestor in the run reaps it, and most of a
rehearsal's Ray processes are not reaped so (one 7B rehearsal: 57 CPU-s counted by `time`, 160 CPU-s of an idle
machine busy). Every process of a test inherits pytest's PYTEST_CURRENT_TEST, Ray's workers included (the
rehearsal passes its environment on), so each process is charged to its test by what it carries, whatever its
parent. The environment (verl-0.9.1, ...) is its VIRTUAL_ENV, else the venv in its command line.

Each process's utime + stime is read from /proc/PID/stat every --interval seconds and its last reading kept, so a
process shorter than the interval can be missed; the report states the machine's own busy CPU-seconds
(/proc/stat) beside the sum sampled. Reads /proc only: the sampler itself costs ~1% of a core at 0.5 s.
Exit: COMMAND's exit code; 2 on bad arguments.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU-seconds the machine spent on anything but idle and iowait, since boot."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _identity(pid: str) -> dict:
    """The test and environment a process carries, and its command line (read once, at first sight)."""
    test, env = "", ""
    try:
        for item in _read(f"/proc/{pid}/environ").split(b"\0"):
            if item.startswith(b"PYTEST_CURRENT_TEST="):  # "path::name (call)"
                test = item.split(b"=", 1)[1].decode(errors="replace").rsplit(" ", 1)[0]
            elif item.startswith(b"VIRTUAL_ENV="):
                env = os.path.basename(item.split(b"=", 1)[1].decode(errors="replace"))
    except OSError:
        pass
    return {"test": test, "env": env, "cmd": ""}


class Sampler:
    def __init__(self):
        self.procs = {}  # (pid, start tick) -> {"cpu": s, "test", "env", "cmd"}
        self.before = {}

    def sample(self):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
                fields = stat.rsplit(")", 1)[1].split()
                cpu, start = (int(fields[11]) + int(fields[12])) / TICK, int(fields[19])
            except (OSError, IndexError, ValueError):
                continue
            key = (int(pid), start)
            proc = self.procs.get(key)
            if proc is None:
                proc = self.procs[key] = _identity(pid)
            proc["cpu"] = cpu
            # a Ray worker starts as default_worker.py (setup_worker.py first when the job has a runtime env, as every
            # verl job does), idles as ray::IDLE, then takes its actor's name: read it again until it has one
            if not proc["cmd"] or any(w in proc["cmd"] for w in ("default_worker.py", "setup_worker.py")) \
                    or proc["cmd"].startswith("ray::IDLE"):
                try:
                    cmd = _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:
                    cmd = ""
                proc["cmd"] = cmd[:200] or proc["cmd"]

    def start(self):
        self.sample()
        self.before = {key: p["cpu"] for key, p in self.procs.items()}

    def rows(self) -> list:
        out = []
        for key, p in self.procs.items():
            cpu = p["cpu"] - self.before.get(key, 0.0)
            if cpu > 0:
                venv = re.search(r"\.venvs/([^/]+)/", p["cmd"])
                env = p["env"] or (venv.group(1) if venv else "")
                out.append({"pid": key[0], "cpu_s": round(cpu, 2), "test": p["test"], "env": env, "cmd": p["cmd"]})
        return sorted(out, key=lambda r: -r["cpu_s"])


def run(command: list, out: str, interval: float) -> int:
    sampler = Sampler()
    sampler.start()
    busy0, wall0 = machine_busy(), time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        sampler.sample()
        time.sleep(interval)
    sampler.sample()
    rows = sampler.rows()
    report = {"command": command, "exit": proc.returncode, "wall_s": round(time.monotonic() - wall0, 1),
              "machine_busy_cpu_s": round(machine_busy() - busy0, 1),
              "sampled_cpu_s": round(sum(r["cpu_s"] for r in rows), 1), "interval_s": interval, "processes": rows}
    tmp = f"{out}.tmp"
    with open(tmp, "w") as fh:
        json.dump(report, fh)
    os.replace(tmp, out)
    print(f"cpu-by-test: {report['wall_s']} s wall, machine busy {report['machine_busy_cpu_s']} CPU-s, "
          f"sampled {report['sampled_cpu_s']} CPU-s -> {out}", file=sys.stderr)
    return proc.returncode


def summarize(report: dict, by: str, top: int) -> str:
    totals = collections.Counter()
    for r in report["processes"]:
        test = r["test"] or "(no test: pytest workers, installers, the rest of the machine)"
        key = {"test": test, "file": test.split("::")[0], "env": r["env"] or "(none)"}[by]
        if by != "env":
            key = f"{r['env'] or '-'}  {key}"
        totals[key] += r["cpu_s"]
    lines = [f"{report['wall_s']} s wall; machine busy {report['machine_busy_cpu_s']} CPU-s; "
             f"sampled {report['sampled_cpu_s']} CPU-s; exit {report['exit']}"]
    lines += [f"{cpu:8.1f}  {key}" for key, cpu in totals.most_common(top)]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="The report is JSON: wall_s, machine_busy_cpu_s, sampled_cpu_s and one row "
                                            "per process (pid, cpu_s, test, env, cmd).")
    parser.add_argument("--out", help="write the report here (with -- COMMAND)")
    parser.add_argument("--report", help="summarize a report written earlier")
    parser.add_argument("--by", choices=("file", "test", "env"), default="file")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples (default 0.5)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.report:
        if command or args.out:
            parser.error("--report reads a report; it takes no COMMAND and no --out")
        try:
            report = json.loads(open(args.report).read())
        except (OSError, ValueError) as exc:
            print(f"cpu-by-test: cannot read {args.report}: {exc}", file=sys.stderr)
            return 2
        print(summarize(report, args.by, args.top))
        return 0
    if not command or not args.out:
        parser.error("give --out FILE -- COMMAND..., or --report FILE")
    if args.interval <= 0:
        parser.error(f"--interval {args.interval}: must be > 0")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        parser.error(f"--out {args.out}: its folder does not exist")
    return run(command, args.out, args.interval)


if __name__ == "__main__":
    sys.exit(main())
