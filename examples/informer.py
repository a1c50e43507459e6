"""Keep a live copy of a node's pods with pods_api.client.Informer, and print each change.

python examples/informer.py [SOCKET]    # default: $PODS_API_SOCKET, else the kubelet's socket
"""

import asyncio
import contextlib
import os
import sys

from pods_api.client import KUBELET_SOCKET, Client, EventType, Informer


async def main(socket: str) -> None:
    async with Client(socket) as client, Informer(client, fields="status.phase") as informer:
        # Reconnects are the informer's job; it says how the connection stands.
        informer.on_state(lambda state, error: print("state:", state.value, error or "", flush=True))
        async for event in informer:
            if event.type is EventType.INITIAL_SYNC_COMPLETE:
                print(f"synced: {len(informer.pods)} pods", flush=True)  # informer.pods: UID -> Pod
                continue
            pod = event.pod.json()  # Kubernetes JSON; event.pod.raw holds the exact bytes
            meta, phase = pod["metadata"], pod.get("status", {}).get("phase", "")
            print(event.type.name, meta["namespace"], meta["name"], phase, flush=True)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PODS_API_SOCKET", KUBELET_SOCKET)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(path))
