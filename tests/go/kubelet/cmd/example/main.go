// List a node's pods, then follow changes, over the Pods API socket: the same code talks to the
// kubelet and to pods-api.
//
//	go run ./cmd/example [SOCKET]   # default: the kubelet's socket
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	v1 "k8s.io/api/core/v1"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

func main() {
	socket := "/var/lib/kubelet/pods-api/pods-api.sock"
	if len(os.Args) > 1 {
		socket = os.Args[1]
	}
	// "unix:" + the path, not "unix://": after "//" grpc-go reads a relative path's ".." as an authority.
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := podsv1alpha1.NewPodsClient(conn)
	// Only these fields (name, namespace and uid always come along).
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-kubernetes-fieldmask", "status.phase,status.podIPs")

	resp, err := client.ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
	if err != nil {
		log.Fatal(err) // codes.FailedPrecondition: the sources have not synced yet; retry
	}
	for _, raw := range resp.Pods {
		var pod v1.Pod
		if err := pod.Unmarshal(raw); err != nil {
			log.Fatal(err)
		}
		fmt.Println(pod.Namespace, pod.Name, pod.Status.Phase)
	}

	stream, err := client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
	if err != nil {
		log.Fatal(err)
	}
	for {
		event, err := stream.Recv()
		if err != nil {
			log.Fatal(err)
		}
		switch event.Type {
		case podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE:
			fmt.Println(event.Type) // no pod: the snapshot is complete
		case podsv1alpha1.EventType_ADDED, podsv1alpha1.EventType_MODIFIED, podsv1alpha1.EventType_DELETED:
			var pod v1.Pod // a DELETED pod carries only its name, namespace and uid
			if err := pod.Unmarshal(event.Pod); err != nil {
				log.Fatal(err)
			}
			fmt.Println(event.Type, pod.Namespace, pod.Name, pod.Status.Phase)
		default:
			// UNSPECIFIED, or a type from a newer kubelet: skip it.
		}
	}
}
