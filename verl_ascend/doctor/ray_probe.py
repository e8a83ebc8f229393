"""Run as ``python -m verl_ascend.doctor.ray_probe ADDRESS``: join a Ray cluster as a driver, print
its nodes' resources as one JSON line, leave. A separate process so doctor can bound it with a
timeout (a half-dead GCS makes ``ray.init`` wait)."""

import json
import os
import sys


def main(address: str) -> int:
    # Ray 2.5x+ turns token auth on for clusters it starts and keeps the token in ~/.ray/auth_token;
    # a driver joining by address only sends it when RAY_AUTH_MODE=token. Do what `ray start`'s own
    # children do: when a token is at hand and the user chose no mode, use it.
    token_file = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    if "RAY_AUTH_MODE" not in os.environ and (os.environ.get("RAY_AUTH_TOKEN") or os.path.isfile(token_file)):
        os.environ["RAY_AUTH_MODE"] = "token"
    import ray  # after the mode is chosen: Ray reads it at import

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
