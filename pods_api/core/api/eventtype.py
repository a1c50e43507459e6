"""The kubelet's v1alpha1.EventType, one definition for the server and the client: the watch
streams publish it (core/store/watch.py) and the client reads it (client/client.py). Its own
module so that the client loads no part of the server with it."""

from __future__ import annotations

from enum import IntEnum


class EventType(IntEnum):
    """The numbers as released in k8s.io/kubelet. UNSPECIFIED (0) is not one of them: a server
    never publishes it, and `Client.watch` skips it as it skips any number it does not know."""

    ADDED = 1
    MODIFIED = 2
    DELETED = 3
    INITIAL_SYNC_COMPLETE = 4
