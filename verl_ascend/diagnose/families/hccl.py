"""Faults from the CANN HCCL user guide's fault chapter (hcclug): ports taken by other processes, error CQEs on
the RoCE link, HCCL versions that differ, and the cluster heartbeat that names the rank that exited."""

from .model import GH, HIASCEND, Family, Rule

_HCCLUG = HIASCEND + "zh/canncommercial/850/commlib/hcclug/"

FAMILIES = {f.id: f for f in (
    Family(
        "peer_exited", 12, "A peer rank exited or hung: the others timed out waiting for it",
        "HCCL's cluster heartbeat saw one rank stop (Heartbeat Lost: its process exited or its network went down; "
        "Stuck: it stopped entering collectives). Every other rank then times out in a collective; their errors "
        "are the echo. The culprit is the rank named in `Cluster Exception Location` / `status[LOST]`, not the "
        "rank that printed the message.",
        "Open the logs of the culprit (node and device in the `culprit` line below) first: the exception, OOM or "
        "kill that ended it is the real failure (`verl-ascend diagnose` on that node's Ray session / plog folder). "
        "If that process was only slow (checkpoint save, long rollout): `export HCCL_EXEC_TIMEOUT=<s>` on every node "
        "before `ray start`.",
        (_HCCLUG + "hcclug_000055.html", GH + "Ascend/pytorch/blob/master/docs/zh/troubleshooting/HCCL_timeout.md",
         _HCCLUG + "hcclug_000059.html"),
    ),
    Family(
        "hccl_port_taken", 31, "HCCL connected to a wrong server: its default ports were taken",
        "HCCL listens on consecutive ports from HCCL_IF_BASE_PORT (default 60000-60015); the kernel handed one of "
        "them to another process as an ephemeral port (or another job listens there), so a rank reached that "
        "process instead of its peer and got an acknowledgement it did not expect (`Recv unmatched ack`).",
        "On every node: `sysctl -w net.ipv4.ip_local_reserved_ports=60000-60015` (persist it in /etc/sysctl.conf) so "
        "the kernel stops lending those ports; if they are still held, move HCCL: `export HCCL_IF_BASE_PORT=<base>` "
        "before `ray start` and reserve that range the same way; `ss -ltnp | grep :600` shows the holder.",
        (HIASCEND + "zh/CANNCommunityEdition/83RC1alpha002/hccl/hcclug/hcclug_000036.html",),
    ),
    Family(
        "roce_error_cqe", 46, "RoCE retransmissions exhausted between two NPUs (error CQE)",
        "The device NIC gave up retransmitting to a peer (an error completion-queue entry): the link between the two "
        "devices flapped or dropped packets, or the peer process exited first so nothing answered. A hang and a "
        "collective timeout follow.",
        "The message names both ends (local / peer server, device ID, device IP): on both nodes "
        "`hccn_tool -i <device> -link_stat -g` (link flaps), `hccn_tool -i <device> -net_health -g`, "
        "`hccn_tool -i <device> -stat -g` (drops); check the switch port; if the peer's process died first, read "
        "its log for the failure that ended it.",
        (_HCCLUG + "hcclug_000061.html", GH + "vllm-project/vllm-ascend/issues/7384"),
    ),
    Family(
        "hccl_version_mismatch", 47, "HCCL (CANN) versions differ between ranks",
        "The two ends of a link run different HCCL versions (EI0008): nodes with different CANN toolkits.",
        "Install the same CANN toolkit on every node (`cat /usr/local/Ascend/ascend-toolkit/latest/version.cfg`; "
        "`verl-ascend doctor` prints it), source its set_env.sh before `ray start`, restart Ray.",
        (HIASCEND + "zh/canncommercial/900/maintenref/troubleshooting/atlaserrorcode_15_0248.html",),
    ),
)}

_PEER = r"Cluster Exception Location\[IP/ID\]:\[[\d.]+/\d+\]"
RULES = (
    Rule("peer_exited", ("Cluster Exception Location",), _PEER, any_level=True),
    # the run log's heartbeat trace: "rank [me]: rank [culprit] status[LOST] by rank [reporter]" (printed at INFO)
    Rule("peer_exited", ("status[LOST]", "status[STUCK]"), r"rank \[[\d.]+/\d+\] status\[(?:LOST|STUCK)\]", any_level=True),
    Rule("hccl_port_taken", ("Recv unmatched ack",), r"Recv unmatched ack"),
    Rule("roce_error_cqe", ("EI0013", "ROCE CQE", "ROCE_CQE", "error cqe"),
         r"\bEI0013\b|ROCE[ _]CQE|error cqe status"),
    Rule("hccl_version_mismatch", ("EI0008", "HCCL versions are inconsistent"),
         r"\bEI0008\b|HCCL versions are inconsistent"),
    # TLS check at communicator creation (EI0014 in CANN 8.5, EI0016 in 9.0) and HCCP's handshake error
    Rule("tls_mismatch", ("Some ranks tlsStatus", "TLS switch is inconsistent"),
         r"Some ranks tlsStatus are inconsistent|TLS switch is inconsistent"),
    Rule("tls_mismatch", ("EI0014",), r"\bEI0014\b"),
)

# What a heartbeat / CQE line says about the other end: the culprit to name instead of the reporter.
PEER_PATTERNS = (
    ("culprit", r"Cluster Exception Location\[IP/ID\]:\[([\d.]+)/(\d+)\]"),
    ("culprit", r"rank \[([\d.]+)/(\d+)\] status\[(?:LOST|STUCK)\]"),
    ("peer", r"Peer information: server ([\d.x]+), device ID (\d+)"),
)
EXCEPTION_TYPE = r"ExceptionType:\[([^\]]+)\]"

EXTRA_SOURCES = {
    "tls_mismatch": (_HCCLUG + "hcclug_000045.html", "https://www.hiascend.com/document/caselibrary/detail/case_9514"),
}
