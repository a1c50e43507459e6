//go:build tools

// The node's real components, built from the Go module proxy at the version go.mod pins: the
// blank imports keep `go mod tidy` from dropping what `go build k8s.io/kubernetes/cmd/...` needs.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
