// The kubelet's own Pods API server, v1.37.2's code (k8s.io/kubernetes/pkg/kubelet/apis/pods and
// server.ListenAndServePodsServer: its broadcaster, handlers, rate limit and interceptors), fed
// by the kubelet's real pod manager instead of a node: a reference for what the kubelet answers
// where a whole kubelet is not needed (a slow watcher, the texts of its refusals, its shutdown).
//
// Driven by lines on stdin, each answered by one line on stdout once done:
//
//	serving                  answered once the socket listens (the server starts in the background)
//	ready | unready          the sources are (not) ready: FAILED_PRECONDITION until ready
//	pods N SIZE              N pods, each with an annotation of SIZE bytes: one ADDED each
//	round R                  every pod's annotation "round" set to R: one MODIFIED each
//	dropped                  kubelet_pod_watch_events_dropped_total
//	stop                     what SIGTERM does to the kubelet: its context is cancelled, and the
//	                         process exits as its Run returns (it does not wait for its watches)
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/apis/pods"
	"k8s.io/kubernetes/pkg/kubelet/metrics"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	"k8s.io/kubernetes/pkg/kubelet/server"
)

// sourcesReady is the kubelet's config.SourcesReady, switched from stdin.
type sourcesReady struct{ ready atomic.Bool }

func (s *sourcesReady) AddSource(string) {}
func (s *sourcesReady) AllReady() bool   { return s.ready.Load() }

// statuses is the status manager's side: the status each pod was last given.
type statuses struct {
	lock  sync.Mutex
	byUID map[types.UID]v1.PodStatus
}

func (s *statuses) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	s.lock.Lock()
	defer s.lock.Unlock()
	status, ok := s.byUID[uid]
	return status, ok
}

func (s *statuses) set(uid types.UID, status v1.PodStatus) {
	s.lock.Lock()
	defer s.lock.Unlock()
	s.byUID[uid] = status
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: podsserver SOCKET")
		os.Exit(2)
	}
	metrics.Register()
	ctx, cancel := context.WithCancel(context.Background())
	logger := klog.FromContext(ctx)
	manager := kubepod.NewBasicPodManager()
	known := &statuses{byUID: map[types.UID]v1.PodStatus{}}
	ready := &sourcesReady{}
	srv := pods.NewPodsServer(pods.NewBroadcaster(ctx), manager, known, ready)
	go server.ListenAndServePodsServer(ctx, "unix://"+os.Args[1], srv)

	var all []*v1.Pod
	input := bufio.NewScanner(os.Stdin)
	for input.Scan() {
		words := strings.Fields(input.Text())
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "serving":
			waitForSocket(os.Args[1])
		case "ready":
			ready.ready.Store(true)
		case "unready":
			ready.ready.Store(false)
		case "pods":
			count, _ := strconv.Atoi(words[1])
			size, _ := strconv.Atoi(words[2])
			for i := range count {
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
					Name:        fmt.Sprintf("bulk-%d", i),
					Namespace:   "default",
					UID:         types.UID(fmt.Sprintf("bulk-%03d", i)),
					Annotations: map[string]string{"round": "0", "blob": strings.Repeat("x", size)},
				}}
				status := v1.PodStatus{Phase: v1.PodRunning}
				manager.AddPod(pod)
				known.set(pod.UID, status)
				srv.OnPodUpdated(logger, pod, status, true)
				all = append(all, pod)
			}
		case "round":
			for i, old := range all {
				// A new version, as the kubelet's config makes one: queued events keep theirs.
				pod := old.DeepCopy()
				pod.Annotations["round"] = words[1]
				manager.UpdatePod(pod)
				status, _ := known.GetPodStatus(pod.UID)
				srv.OnPodUpdated(logger, pod, status, false)
				all[i] = pod
			}
		case "dropped":
			fmt.Println(dropped())
			continue
		case "stop":
			fmt.Println("ok")
			cancel()
			os.Exit(0)
		default:
			fmt.Fprintf(os.Stderr, "unknown command %q\n", words[0])
			os.Exit(2)
		}
		fmt.Println("ok")
	}
}

// The listener is made by the server's goroutine; the socket file appears when it listens.
func waitForSocket(path string) {
	for {
		if info, err := os.Stat(path); err == nil && info.Mode()&os.ModeSocket != 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dropped() float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		panic(err)
	}
	for _, family := range families {
		if family.GetName() == "kubelet_pod_watch_events_dropped_total" {
			return family.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}
