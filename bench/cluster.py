"""The image and the DaemonSet on a real one-node cluster (tests/support/cluster.py): the image's
size, the time from `kubectl apply -k deploy/overlays/apiserver` to its pod Ready, and a rolling
update to a new tag, each beside a floor on the same node in the same run: a DaemonSet of the
lab's busybox image whose probes are `exec true` on the same periods, so what the floor takes is
the cluster's own part (scheduling, the sandbox, the probes' periods) and the rest is pods-api's
(the image's snapshot, Python's start, the first sync).

For the rolling update, a kubelet-contract watcher on the socket measures the gap a client sees:
from its stream's end (`UNAVAILABLE`, "server is shutting down") to the new pods-api's
`INITIAL_SYNC_COMPLETE` on its reconnected stream.

Where the cluster or the image cannot be had (no go, not root, no buildah), it says why and
measures nothing.

    python bench/cluster.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
import cluster  # noqa: E402  (tests/support is on the path only from here)
import image  # noqa: E402
from containerd import IMAGE  # noqa: E402
from daemon import Unavailable  # noqa: E402
from podrecorder import Recorder  # noqa: E402
from released import SYNCED  # noqa: E402

ROOT = HERE.parent
OVERLAY = ROOT / "deploy" / "overlays" / "apiserver"
SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock"
TIMEOUT = "300s"
# The tag deploy/ names, and a second one for the rolling update: the same image under both.
TAG = image.version()
NEXT_TAG = f"{TAG}-next"


def floor_daemonset(generation: int) -> dict[str, Any]:
    """pods-api's DaemonSet's shape with nothing of pods-api in it: the same probes' periods, an
    `exec true` each, on the lab's local busybox image; `generation` changes its template."""
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 2, "timeoutSeconds": 3}
    labels = {"app": "floor"}
    container = {
        "name": "floor",
        "image": IMAGE,
        "imagePullPolicy": "Never",
        # Exits on SIGTERM, as pods-api does: a bare `sleep` as PID 1 ignores it, and its pod's
        # rollout would wait out the 30 s grace period.
        "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
        "env": [{"name": "GENERATION", "value": str(generation)}],
        "startupProbe": {**probe, "failureThreshold": 60},
        "readinessProbe": {**probe, "periodSeconds": 10},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "floor", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"tolerations": [{"operator": "Exists"}], "containers": [container]},
            },
        },
    }


def rollout(lab: cluster.Cluster, name: str) -> None:
    lab.kubectl("-n", "kube-system", "rollout", "status", f"daemonset/{name}", f"--timeout={TIMEOUT}")


def measure_floor(lab: cluster.Cluster) -> dict[str, float]:
    start = time.monotonic()
    lab.apply(floor_daemonset(0))
    rollout(lab, "floor")
    ready = time.monotonic() - start
    start = time.monotonic()
    lab.apply(floor_daemonset(1))
    rollout(lab, "floor")
    rolled = time.monotonic() - start
    lab.kubectl("-n", "kube-system", "delete", "daemonset", "floor", "--wait=true")
    return {"ready": ready, "rolled": rolled}


def measure_ours(lab: cluster.Cluster) -> dict[str, float]:
    start = time.monotonic()
    lab.kubectl("apply", "-k", str(OVERLAY))
    rollout(lab, "pods-api")
    ready = time.monotonic() - start
    recorder = Recorder(f"unix:{SOCKET}")
    try:
        recorder.wait(lambda event: event.type == SYNCED)
        start = time.monotonic()
        lab.kubectl(
            "-n", "kube-system", "set", "image", "daemonset/pods-api", f"pods-api=pods-api:{NEXT_TAG}"
        )
        rollout(lab, "pods-api")
        rolled = time.monotonic() - start
        end = recorder.wait(lambda event: bool(event.end))
        again = recorder.wait(lambda event: event.type == SYNCED and event.stream > end.stream)
        gap = again.at - end.at
    finally:
        recorder.close()
    lab.kubectl("delete", "-k", str(OVERLAY), "--wait=true")
    return {"ready": ready, "rolled": rolled, "gap": gap}


def run(rounds: int) -> dict[str, Any]:
    reason = cluster.cluster_unavailable() or image.unavailable_reason()
    if reason:
        return {"skipped": reason}
    built = image.build()
    root = Path(tempfile.mkdtemp(prefix="pkc-", dir="/tmp"))
    try:
        with cluster.running(root) as lab:
            for tag in (TAG, NEXT_TAG):
                lab.import_image(image.archive(tag))
            lab.node.set_pods_api(False)  # a node older than v1.37, which the overlay is for
            turns = []
            for _ in range(rounds):  # taking turns, so drift of the machine's load hits both
                turns.append({"floor": measure_floor(lab), "ours": measure_ours(lab)})
            return {"image": image.describe(built), "turns": turns}
    except Unavailable as exc:
        return {"skipped": str(exc)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(result: dict[str, Any]) -> None:
    if "skipped" in result:
        print(f"cluster: skipped: {result['skipped']}")
        return
    print(result["image"])
    print(
        f"{'round':>5} {'floor ready':>12} {'ours ready':>11} {'ratio':>6} {'floor roll':>11} "
        f"{'ours roll':>10} {'ratio':>6} {'watch gap':>10}"
    )
    for i, turn in enumerate(result["turns"], 1):
        floor, ours = turn["floor"], turn["ours"]
        print(
            f"{i:>5} {floor['ready']:>11.1f}s {ours['ready']:>10.1f}s {ours['ready'] / floor['ready']:>6.2f} "
            f"{floor['rolled']:>10.1f}s {ours['rolled']:>9.1f}s {ours['rolled'] / floor['rolled']:>6.2f} "
            f"{ours['gap']:>9.2f}s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="turns of the floor and ours (default 2)")
    args = parser.parse_args()
    report(run(args.rounds))


if __name__ == "__main__":
    main()
