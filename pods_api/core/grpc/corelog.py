"""What grpc's own Python layer logs about clients, as one throttled line each instead of a
traceback per call: a client that went away before its answer was sent (grpc logs
"ExecuteBatchError raised in core by servicer method [...]" with a traceback when the failed
send beats its own note that the client closed), and request metadata that is not UTF-8 (grpc
logs "Invalid encoding on ..." with a traceback at every read of it, then reads it as
Latin-1). Neither is the server's fault, and a client can cause either at will; any other
record of grpc's passes untouched."""

from __future__ import annotations

import logging
import re

from pods_api.core.policy.throttled_log import ThrottledLog

GRPC_LOGGER = "grpc._cython.cygrpc"
log = logging.getLogger(__name__)

_GONE = re.compile(r"ExecuteBatchError raised in core by servicer method \[(?P<method>[^\]]*)\]")
_NOT_UTF8 = "Invalid encoding on "


class ClientFaults(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._gone = ThrottledLog(log)
        self._not_utf8 = ThrottledLog(log)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        gone = _GONE.search(message)
        if gone is not None:
            self._gone.warning(f"a gRPC client went away before its answer was sent ({gone['method']})")
            return False
        if message.startswith(_NOT_UTF8):
            self._not_utf8.warning("a gRPC request carried metadata that is not UTF-8 (read as Latin-1)")
            return False
        return True


_FILTER = ClientFaults()


def install() -> None:
    """Idempotent: the one filter on grpc's logger."""
    logger = logging.getLogger(GRPC_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
