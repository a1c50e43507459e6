// Command standin stands in for the kubelet's Pods API server, built from the kubelet's own
// stubs (k8s.io/kubelet/pkg/apis/pods/v1alpha1) and k8s.io/api/core/v1. It serves, on a UNIX
// socket, the pods the test gives it on stdin, and tells every watch of each change as the
// kubelet does: one ADDED per pod in UID order, INITIAL_SYNC_COMPLETE, then live events, a
// DELETED carrying a new pod with only name, namespace and uid.
//
//	standin -socket S [-draft]
//
// -draft numbers the events as the pre-release draft of the API did (ADDED 0, MODIFIED 1,
// DELETED 2, INITIAL_SYNC_COMPLETE 3): an upstream that speaks another version than the
// released one, which a client built against the release must not take for it.
//
// stdin, one JSON object a line:
//
//	{"op": "put", "pod": <a v1.Pod in Kubernetes JSON>}  ADDED, or MODIFIED when its UID is known
//	{"op": "delete", "uid": "..."}                       DELETED
//	{"op": "send", "type": N, "uid": "..."}              an event of any number (UNSPECIFIED, one
//	                                                     from a newer kubelet) with that pod, or none
//	{"op": "stats"}
//
// stdout: {"ready": true} once it listens, then one line per command, once every open watch has
// the event queued: {"op", "uid", "raw": the pod bytes sent (v1.Pod.Marshal), "lists": ListPods
// calls so far}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// A watch whose client reads nothing may hold this many events before it is ended, as the
// kubelet ends a watcher that falls behind; the tests send a handful.
const watchBuffer = 1024

type command struct {
	Op   string          `json:"op"`
	Pod  json.RawMessage `json:"pod"`
	UID  string          `json:"uid"`
	Type int32           `json:"type"`
}

type server struct {
	podsv1alpha1.UnimplementedPodsServer
	draft    bool
	mu       sync.Mutex
	pods     map[string][]byte // uid -> v1.Pod.Marshal()
	watchers map[chan *podsv1alpha1.WatchPodsEvent]struct{}
	lists    int
}

func (s *server) sorted() [][]byte {
	uids := make([]string, 0, len(s.pods))
	for uid := range s.pods {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	out := make([][]byte, len(uids))
	for i, uid := range uids {
		out[i] = s.pods[uid]
	}
	return out
}

func (s *server) ListPods(ctx context.Context, _ *podsv1alpha1.ListPodsRequest) (*podsv1alpha1.ListPodsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	return &podsv1alpha1.ListPodsResponse{Pods: s.sorted()}, nil
}

func (s *server) GetPod(ctx context.Context, req *podsv1alpha1.GetPodRequest) (*podsv1alpha1.GetPodResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pod, ok := s.pods[req.PodUID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %q not found", req.PodUID)
	}
	return &podsv1alpha1.GetPodResponse{Pod: pod}, nil
}

func (s *server) WatchPods(_ *podsv1alpha1.WatchPodsRequest, stream podsv1alpha1.Pods_WatchPodsServer) error {
	events := make(chan *podsv1alpha1.WatchPodsEvent, watchBuffer)
	s.mu.Lock()
	// The snapshot and the registration under one lock: no change falls between them.
	start := s.sorted()
	s.watchers[events] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, events)
		s.mu.Unlock()
	}()
	for _, pod := range start {
		if err := s.send(stream, &podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_ADDED, Pod: pod}); err != nil {
			return err
		}
	}
	if err := s.send(stream, &podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case event, open := <-events:
			if !open {
				return status.Error(codes.ResourceExhausted, "watch fell behind")
			}
			if err := s.send(stream, event); err != nil {
				return err
			}
		}
	}
}

// draftNumbers are the event numbers of the pre-release draft, by released type.
var draftNumbers = map[podsv1alpha1.EventType]podsv1alpha1.EventType{
	podsv1alpha1.EventType_ADDED:                 0,
	podsv1alpha1.EventType_MODIFIED:              1,
	podsv1alpha1.EventType_DELETED:               2,
	podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE: 3,
}

// send writes one event, numbered as released or, with -draft, as the draft numbered it.
func (s *server) send(stream podsv1alpha1.Pods_WatchPodsServer, event *podsv1alpha1.WatchPodsEvent) error {
	if number, ok := draftNumbers[event.Type]; ok && s.draft {
		event = &podsv1alpha1.WatchPodsEvent{Type: number, Pod: event.Pod}
	}
	return stream.Send(event)
}

// broadcast queues an event on every watch; the caller holds s.mu.
func (s *server) broadcast(event *podsv1alpha1.WatchPodsEvent) {
	for events := range s.watchers {
		select {
		case events <- event:
		default:
			close(events)
			delete(s.watchers, events)
		}
	}
}

func (s *server) apply(cmd command) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reply := map[string]any{"op": cmd.Op}
	switch cmd.Op {
	case "put":
		pod := &v1.Pod{}
		if err := json.Unmarshal(cmd.Pod, pod); err != nil {
			return nil, fmt.Errorf("put: not a v1.Pod: %w", err)
		}
		raw, err := pod.Marshal()
		if err != nil {
			return nil, err
		}
		uid := string(pod.UID)
		kind := podsv1alpha1.EventType_ADDED
		if _, known := s.pods[uid]; known {
			kind = podsv1alpha1.EventType_MODIFIED
		}
		s.pods[uid] = raw
		s.broadcast(&podsv1alpha1.WatchPodsEvent{Type: kind, Pod: raw})
		reply["uid"], reply["raw"], reply["type"] = uid, raw, kind.String()
	case "delete":
		raw, known := s.pods[cmd.UID]
		if !known {
			return nil, fmt.Errorf("delete: no pod %q", cmd.UID)
		}
		old := &v1.Pod{}
		if err := old.Unmarshal(raw); err != nil {
			return nil, err
		}
		delete(s.pods, cmd.UID)
		// The kubelet's DELETED: a new pod with the identity alone, never the stale end state.
		gone := &v1.Pod{}
		gone.Name, gone.Namespace, gone.UID = old.Name, old.Namespace, old.UID
		bare, err := gone.Marshal()
		if err != nil {
			return nil, err
		}
		s.broadcast(&podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_DELETED, Pod: bare})
		reply["uid"], reply["raw"] = cmd.UID, bare
	case "send":
		raw := s.pods[cmd.UID]
		s.broadcast(&podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType(cmd.Type), Pod: raw})
		reply["uid"], reply["raw"] = cmd.UID, raw
	case "stats":
	default:
		return nil, fmt.Errorf("unknown op %q", cmd.Op)
	}
	reply["lists"] = s.lists
	return reply, nil
}

func main() {
	socket := flag.String("socket", "", "the UNIX socket to serve on")
	draft := flag.Bool("draft", false, "number the events as the pre-release draft did")
	flag.Parse()
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := &server{draft: *draft, pods: map[string][]byte{}, watchers: map[chan *podsv1alpha1.WatchPodsEvent]struct{}{}}
	grpcServer := grpc.NewServer()
	podsv1alpha1.RegisterPodsServer(grpcServer, s)
	go func() {
		if err := grpcServer.Serve(listener); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	out := json.NewEncoder(os.Stdout)
	_ = out.Encode(map[string]bool{"ready": true})
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for lines.Scan() {
		var cmd command
		if err := json.Unmarshal(lines.Bytes(), &cmd); err != nil {
			fmt.Fprintln(os.Stderr, "standin:", err)
			os.Exit(2)
		}
		reply, err := s.apply(cmd)
		if err != nil {
			fmt.Fprintln(os.Stderr, "standin:", err)
			os.Exit(2)
		}
		_ = out.Encode(reply)
	}
	grpcServer.Stop() // stdin closed: the test is done with it
}
