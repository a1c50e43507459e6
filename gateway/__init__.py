"""The HTTP/JSON gateway to the Pods API: `gateway.app.create_app(core)`."""
