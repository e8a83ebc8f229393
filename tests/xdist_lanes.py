"""Two of pytest-xdist's workers run the rehearsal files; the others run everything else first.

Measured (2026-12-06, this 2-core host, verl-ascend rehearse of the shipped 7B recipe, 1 step + resume, started
together N at a time, every process charged by dev/cpu-by-test.py): alone 169 CPU-s in 128 s; two at once 197
CPU-s each (+16 %), both done in 208 s; three at once 263 CPU-s each (+55 %), all done in 399 s. Two rehearsals
already keep both cores busy (one uses ~1.3 cores), a third only adds the waiting of a few dozen Ray and verl
processes. `--dist loadfile` as it comes hands the first files out two per worker, so with three workers the
three longest rehearsal files ran at once from the start.

Here, under `--dist loadfile`: the workers gw0 and gw1 (the rehearsal lanes) take the rehearsal files
(``LONGEST_FIRST``, in that order), the next one when the last test of the one before is running, and only when
those are gone anything else; the other workers take the other files and never a rehearsal file while a rehearsal
lane lives. With one or two workers every worker is a rehearsal lane, which is xdist's own order with the rehearsal
files first.
"""

REHEARSAL_LANES = ("gw0", "gw1")


def make(config, log, heavy_names):
    """A ``LoadFileScheduling`` that keeps the files named in ``heavy_names`` (base names) to the rehearsal lanes."""
    from pathlib import PurePosixPath

    from xdist.scheduler import LoadFileScheduling

    def heavy(scope: str) -> bool:
        return PurePosixPath(scope.split("::", 1)[0]).name in heavy_names

    class RehearsalLanes(LoadFileScheduling):
        def _lane(self, node) -> bool:
            return node.workerinput.get("workerid") in REHEARSAL_LANES

        def _may_take_heavy(self, node) -> bool:
            return self._lane(node) or not any(self._lane(n) for n in self.nodes)

        def _next(self, node):
            """The scope ``node`` should take now, or None (not yet, or never)."""
            # a worker holds its last test back until it is sent more or told to stop (it must know the next test to
            # tear its fixtures down), so "nothing pending" never comes: 1 is "the last test of its file"
            pending = self._pending_of(self.assigned_work.get(node, {}))
            heavies = [scope for scope in self.workqueue if heavy(scope)]
            lights = [scope for scope in self.workqueue if not heavy(scope)]
            if self._may_take_heavy(node) and heavies:
                return heavies[0] if pending <= 1 else None
            return lights[0] if lights and pending <= 2 else None

        def _assign_work_unit(self, node) -> None:
            scope = self._next(node)
            if scope is None:
                return
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            left = self.workqueue if self._may_take_heavy(node) else [s for s in self.workqueue if not heavy(s)]
            if not left:
                node.shutdown()  # runs what it holds, then stops: nothing left that this worker may take
                return
            self._assign_work_unit(node)

    return RehearsalLanes(config, log)
