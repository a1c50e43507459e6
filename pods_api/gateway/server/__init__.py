"""The gateway's HTTP server: everything that leans on uvicorn's (and h11's) internals, in one
room, so that an upgrade of uvicorn is a review of this package alone.

- `connection.py`: the HTTP/1.1 connection class (uvicorn's `H11Protocol`, with the limits a
  socket any agent can open needs);
- `hooks.py`: what that connection offers a response past ASGI (`ConnectionHooks`, a typed
  Protocol): the only way the app reaches it;
- `runner.py`: the uvicorn server the process runs, which leaves the process's signals alone.

Each private hook is pinned to the tested minor version (pyproject.toml) and asserted as a
hook by tests/unit/gateway/test_internals.py.
"""
