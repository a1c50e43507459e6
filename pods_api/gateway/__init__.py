"""The HTTP/JSON gateway to the Pods API: `pods_api.gateway.app.create_app(core)`."""
