"""bench/rollout_balance.py's request-level model against verl's own request router.

The model must route the way the installed verl does: verl 0.7.1+ ``GlobalRequestLoadBalancer``
(fewest requests in flight, shared by all agent-loop workers; a plain class in 0.9's
``verl/workers/rollout/router.py``) or verl 0.6's ``AsyncLLMServerManager._choose_server`` (per
agent-loop worker, fewest requests sent). verl's class runs here over stand-in server handles.
"""

import numpy as np
from test_rollout_balance_bench import LONG, SHORT
from test_rollout_balance_bench import bench as bench  # noqa: F401,F811  (re-used module fixture)


def _verl_router(servers: int):
    """verl's own request router over stand-in server handles, adapted to the bench's interface."""
    import itertools

    try:
        from verl.workers.rollout.router import GlobalRequestLoadBalancer  # verl 0.9
    except ImportError:
        GlobalRequestLoadBalancer = None
    ids = itertools.count()
    if GlobalRequestLoadBalancer is not None:
        balancer = GlobalRequestLoadBalancer({f"s{i}": object() for i in range(servers)})

        class Global:
            kind = "global"

            def acquire(self, worker):
                return int(balancer.acquire_server(request_id=f"r{next(ids)}")[0][1:])

            def release(self, server):
                balancer.release_server(server_id=f"s{server}")

        return Global()
    from verl.experimental.agent_loop.agent_loop import AsyncLLMServerManager  # verl 0.6

    handles = [object() for _ in range(servers)]
    managers = {}

    class PerWorker:
        kind = "per-worker"

        def acquire(self, worker):
            if worker not in managers:
                managers[worker] = AsyncLLMServerManager(config=None, server_handles=list(handles))
            return handles.index(managers[worker]._choose_server(f"r{next(ids)}"))

        def release(self, server):
            pass

    return PerWorker()


def test_request_model_routes_around_a_busy_server_like_verls_balancer(bench):  # noqa: F811
    """Staggered arrivals (a second turn, a late worker): verl's router and the bench's model of it
    make the same choices. The global balancer keeps new requests off the server still busy with
    the long-tail sample; verl 0.6's per-worker counter does not look at what is in flight."""
    first = [(0.0, 0, LONG), (0.0, 0, SHORT), (0.0, 0, SHORT), (0.0, 0, SHORT)]
    later = [(50.0 + 10 * k, 0, SHORT) for k in range(6)]  # each short one is done before the next arrives
    requests = first + later
    verl_router = _verl_router(4)
    theirs = bench.serve(requests, servers=4, slots=8, router=verl_router)
    if verl_router.kind == "global":
        ours = bench.serve(requests, servers=4, slots=8, router=bench.LeastInFlight(4, np.random.default_rng(0)))
        for out in (theirs, ours):
            busy = out["servers"][0]
            assert busy not in out["servers"][len(first):]  # nothing more queued behind the long sample
            assert out["makespan"].max() == LONG
    else:
        ours_router = bench.LeastAssigned(4, np.random.default_rng(0), workers=1)
        ours = bench.serve(requests, servers=4, slots=8, router=ours_router)
        for out in (theirs, ours):  # counts only: every server in turn, the busy one included
            assert all(s == out["servers"][k % 4] for k, s in enumerate(out["servers"]))
            assert out["servers"][0] in out["servers"][len(first):]


