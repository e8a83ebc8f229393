"""Run as ``python -m verl_ascend.doctor.ray_probe ADDRESS``: join a Ray cluster as a driver, print
its nodes' resources as one JSON line, leave. A separate process so doctor can bound it with a
timeout (a half-dead GCS makes ``ray.init`` wait)."""

import json
import sys


def main(address: str) -> int:
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        nodes = [{"alive": bool(n.get("Alive")), "ip": n.get("NodeManagerAddress"),
                  "resources": n.get("Resources", {})} for n in ray.nodes()]
    finally:
        ray.shutdown()
    print(json.dumps({"nodes": nodes}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
