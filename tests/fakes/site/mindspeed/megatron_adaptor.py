"""TEST DOUBLE of mindspeed.megatron_adaptor.

The real module patches Megatron's modules in place, so it must run before anything imports Megatron
(a module that already did ``from megatron.core import X`` keeps the unpatched X). It imports Megatron
itself to patch it; this double does the same and records what was already imported at that moment.
``repatch(options)`` re-applies the real patches for a worker's options; here it only records them.

Records go to ``events`` and, when ``FAKE_MINDSPEED_LOG`` names a file, one JSON line each there
(Ray workers and other processes append to the same file).
"""

import json
import os
import sys

events = []


def _record(event: dict) -> None:
    event = {**event, "pid": os.getpid()}
    events.append(event)
    path = os.environ.get("FAKE_MINDSPEED_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps(event, default=str) + "\n")


_record(
    {
        "event": "adaptor_import",
        "megatron_imported_before": sorted(m for m in sys.modules if m == "megatron" or m.startswith("megatron.")),
        # modules mid-import at this moment include whichever one was about to import Megatron
        "verl_modules_loaded": sorted(m for m in sys.modules if m.startswith("verl.utils.megatron")),
    }
)

import megatron.core  # noqa: E402,F401  (the real adaptor imports what it patches)

_record({"event": "adaptor_done"})


def repatch(options):
    _record({"event": "repatch", "options": dict(options)})
