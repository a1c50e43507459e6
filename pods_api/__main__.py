from pods_api.serve.cli import entry

entry()
