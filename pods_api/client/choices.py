"""What the command line can name before it loads the client (client.py) or a renderer
(output.py): where a Pods API is, and the output formats of `pods-api get` and `watch`."""

from __future__ import annotations

from typing import Literal

# Where the kubelet (v1.36+) serves its Pods API.
KUBELET_SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock"

# kubectl's names for them.
Format = Literal["table", "wide", "json", "yaml", "name"]
FORMATS: tuple[Format, ...] = ("table", "wide", "json", "yaml", "name")
