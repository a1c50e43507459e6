// Command conformance is a Pods API client built from the kubelet's own module
// (k8s.io/kubelet/pkg/apis/pods/v1alpha1) and k8s.io/api/core/v1, as a node agent is. The test
// suite points it at a running pods-api and asserts on what it prints: one JSON object a line.
//
//	conformance -socket S [-mask PATHS] list
//	conformance -socket S [-mask PATHS] get UID
//	conformance -socket S [-mask PATHS] [-api kubelet|doc|lookup] watch
//	conformance -socket S burst N
//
// Every pod is decoded with v1.Pod.Unmarshal; one that does not decode ends the program (exit 2).
// A call that fails prints {"kind":"error","code":<the Go code name>} and exits 1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// Pod is one pod as received: its bytes, what v1.Pod.Unmarshal made of them (printed with Go's
// own JSON tags), and whether it holds only name, namespace and uid (the kubelet's DELETED).
type Pod struct {
	UID          string  `json:"uid"`
	Name         string  `json:"name"`
	Namespace    string  `json:"namespace"`
	IdentityOnly bool    `json:"identityOnly"`
	Raw          []byte  `json:"raw"`
	Pod          *v1.Pod `json:"pod"`
}

// Event is one WatchPodsEvent: its type as the released enum names it, and its number.
type Event struct {
	Kind   string `json:"kind"`
	Type   string `json:"type"`
	Number int32  `json:"number"`
	Pod    *Pod   `json:"pod"`
}

var out = json.NewEncoder(os.Stdout)

func main() {
	socket := flag.String("socket", "", "the Pods API socket")
	mask := flag.String("mask", "", "x-kubernetes-fieldmask")
	api := flag.String("api", "kubelet", "watch on: kubelet (v1alpha1.Pods), doc (Pods), lookup (podsapi.v1.PodLookup)")
	flag.Parse()
	conn, err := grpc.NewClient("unix://"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if *mask != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-kubernetes-fieldmask", *mask)
	}
	client := podsv1alpha1.NewPodsClient(conn)
	switch flag.Arg(0) {
	case "list":
		resp, err := client.ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
		if err != nil {
			fail(err)
		}
		pods := make([]*Pod, len(resp.Pods))
		for i, raw := range resp.Pods {
			pods[i] = decode(raw)
		}
		emit(map[string]any{"kind": "list", "pods": pods})
	case "get":
		resp, err := client.GetPod(ctx, &podsv1alpha1.GetPodRequest{PodUID: flag.Arg(1)})
		if err != nil {
			fail(err)
		}
		emit(map[string]any{"kind": "get", "pod": decode(resp.Pod)})
	case "watch":
		watch(ctx, conn, client, *api)
	case "burst":
		n, _ := strconv.Atoi(flag.Arg(1))
		codes := map[string]int{}
		for range n {
			_, err := client.ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
			codes[status.Code(err).String()]++
		}
		emit(map[string]any{"kind": "burst", "codes": codes})
	default:
		fmt.Fprintln(os.Stderr, "usage: conformance -socket S [-mask M] [-api A] list|get UID|watch|burst N")
		os.Exit(2)
	}
}

func watch(ctx context.Context, conn *grpc.ClientConn, client podsv1alpha1.PodsClient, api string) {
	var next func() (podsv1alpha1.EventType, []byte, error)
	switch api {
	case "kubelet":
		stream, err := client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
		if err != nil {
			fail(err)
		}
		next = func() (podsv1alpha1.EventType, []byte, error) {
			ev, err := stream.Recv()
			if err != nil {
				return 0, nil, err
			}
			return ev.Type, ev.Pod, nil
		}
	case "lookup":
		// podsapi.v1.PodLookup/WatchPods streams the kubelet's own WatchPodsEvent message; its
		// request (selectors) is empty here: every pod.
		stream := rawStream(ctx, conn, "/podsapi.v1.PodLookup/WatchPods")
		next = func() (podsv1alpha1.EventType, []byte, error) {
			frame, err := recvRaw(stream)
			if err != nil {
				return 0, nil, err
			}
			ev := &podsv1alpha1.WatchPodsEvent{}
			if err := proto.Unmarshal(frame, ev); err != nil {
				return 0, nil, err
			}
			return ev.Type, ev.Pod, nil
		}
	case "doc":
		// The documentation page's PodWatchResponse{v1.Pod pod = 1; EventType type = 2}, read
		// field by field: the pod's bytes go to v1.Pod.Unmarshal, the type is the released enum.
		stream := rawStream(ctx, conn, "/Pods/WatchPods")
		next = func() (podsv1alpha1.EventType, []byte, error) {
			frame, err := recvRaw(stream)
			if err != nil {
				return 0, nil, err
			}
			return docFrame(frame)
		}
	default:
		fail(fmt.Errorf("unknown -api %q", api))
	}
	for {
		kind, raw, err := next()
		if err == io.EOF {
			return
		}
		if err != nil {
			fail(err)
		}
		event := Event{Kind: "event", Type: kind.String(), Number: int32(kind)}
		if kind != podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE || len(raw) > 0 {
			event.Pod = decode(raw)
		}
		emit(event)
	}
}

func docFrame(frame []byte) (podsv1alpha1.EventType, []byte, error) {
	var kind podsv1alpha1.EventType
	var pod []byte
	for len(frame) > 0 {
		number, wire, n := protowire.ConsumeTag(frame)
		if n < 0 {
			return 0, nil, protowire.ParseError(n)
		}
		frame = frame[n:]
		switch {
		case number == 1 && wire == protowire.BytesType:
			value, m := protowire.ConsumeBytes(frame)
			if m < 0 {
				return 0, nil, protowire.ParseError(m)
			}
			pod, n = value, m
		case number == 2 && wire == protowire.VarintType:
			value, m := protowire.ConsumeVarint(frame)
			if m < 0 {
				return 0, nil, protowire.ParseError(m)
			}
			kind, n = podsv1alpha1.EventType(value), m
		default:
			n = protowire.ConsumeFieldValue(number, wire, frame)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
		}
		frame = frame[n:]
	}
	return kind, pod, nil
}

// rawCodec passes message bytes through, for the services no upstream module has stubs for.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func rawStream(ctx context.Context, conn *grpc.ClientConn, method string) grpc.ClientStream {
	desc := &grpc.StreamDesc{ServerStreams: true}
	stream, err := conn.NewStream(ctx, desc, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		fail(err)
	}
	request := []byte{}
	if err := stream.SendMsg(&request); err != nil {
		fail(err)
	}
	if err := stream.CloseSend(); err != nil {
		fail(err)
	}
	return stream
}

func recvRaw(stream grpc.ClientStream) ([]byte, error) {
	var frame []byte
	err := stream.RecvMsg(&frame)
	return frame, err
}

func decode(raw []byte) *Pod {
	pod := &v1.Pod{}
	if err := pod.Unmarshal(raw); err != nil {
		fmt.Fprintf(os.Stderr, "v1.Pod.Unmarshal: %v\n", err)
		os.Exit(2)
	}
	identity := v1.Pod{}
	identity.Name, identity.Namespace, identity.UID = pod.Name, pod.Namespace, pod.UID
	return &Pod{
		UID:          string(pod.UID),
		Name:         pod.Name,
		Namespace:    pod.Namespace,
		IdentityOnly: reflect.DeepEqual(*pod, identity),
		Raw:          raw,
		Pod:          pod,
	}
}

func emit(v any) {
	if err := out.Encode(v); err != nil {
		os.Exit(3)
	}
}

func fail(err error) {
	s := status.Convert(err)
	emit(map[string]any{"kind": "error", "code": s.Code().String(), "message": s.Message()})
	os.Exit(1)
}
