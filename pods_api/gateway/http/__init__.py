"""The gateway's HTTP plumbing, beside the surfaces it carries (gateway/pods.py, gateway/kube/):
the request path (router, parameters, admission, formats, errors, HEAD, Host) and the bodies of
answers and watches."""
