"""HEAD on every GET route: the GET's status and headers without its body (RFC 9110 §9.3.2), as
`curl -I` expects. The request is answered as a GET, and the body is dropped at its first
message, which ends the response; a stream (a watch) then sees its client gone and stops."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# What every route answers, for a 405's Allow (RFC 9110 §15.5.6): the API is read-only, and
# each GET route answers HEAD too.
ALLOW = "GET, HEAD"


async def head_as_get(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    ended = False

    async def without_body(message: Message) -> None:
        nonlocal ended
        if ended:
            return
        if message["type"] == "http.response.body":
            ended = True
            message = {"type": "http.response.body", "body": b"", "more_body": False}
        await send(message)

    await app({**scope, "method": "GET"}, receive, without_body)
