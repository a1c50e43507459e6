// Command clientgo is a controller's pod informer, exactly as controllers build one: client-go's
// SharedInformerFactory (reflector, watch-list, bookmarks, relist on 410) configured from a
// kubeconfig with clientcmd: the file -kubeconfig names (BuildConfigFromFlags), or without it
// the default loading rules ($KUBECONFIG, then ~/.kube/config), as kubectl loads one. It reports,
// one JSON object per line on stdout, the rest.Config the kubeconfig gave, what the informer's
// handlers see and every HTTP exchange it makes; a line "store" on stdin prints the informer's
// store, "list" a List of every namespace's pods, "quit" ends it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// protobuf is what kube-controller-manager and the kubelet set (their --kube-api-content-type
// default); accepting JSON besides is their AcceptContentTypes.
const (
	protobuf   = "application/vnd.kubernetes.protobuf"
	acceptBoth = protobuf + ",application/json"
)

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

func emit(record map[string]any) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(record); err != nil {
		fmt.Fprintln(os.Stderr, "clientgo: stdout:", err)
		os.Exit(2)
	}
}

type podRecord struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	Phase           string `json:"phase"`
}

func record(pod *v1.Pod) podRecord {
	return podRecord{pod.Namespace, pod.Name, string(pod.UID), pod.ResourceVersion, string(pod.Status.Phase)}
}

func podEvent(kind string, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		emit(map[string]any{"event": "error", "error": fmt.Sprintf("%s of a %T", kind, obj)})
		return
	}
	emit(map[string]any{"event": kind, "pod": record(pod)})
}

// exchanges reports each request's path, query and the response's status and Content-Type:
// which media type client-go asked for and which it decoded.
type exchanges struct{ next http.RoundTripper }

func (e exchanges) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := e.next.RoundTrip(req)
	entry := map[string]any{
		"event": "request", "path": req.URL.Path, "query": req.URL.RawQuery,
		"accept": req.Header.Get("Accept"),
	}
	if err != nil {
		entry["error"] = err.Error()
	} else {
		entry["status"] = resp.StatusCode
		entry["contentType"] = resp.Header.Get("Content-Type")
	}
	emit(entry)
	return resp, err
}

func sorted(pods []podRecord) []podRecord {
	sort.Slice(pods, func(i, j int) bool {
		return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
	})
	return pods
}

// load reads the kubeconfig as a controller does: the named file, or the default loading rules.
func load(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

func list(client kubernetes.Interface) {
	listed, err := client.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		emit(map[string]any{"event": "error", "error": "list: " + err.Error()})
		return
	}
	pods := []podRecord{}
	for i := range listed.Items {
		pods = append(pods, record(&listed.Items[i]))
	}
	emit(map[string]any{"event": "list", "pods": sorted(pods), "resourceVersion": listed.ResourceVersion})
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig to read (clientcmd); '' is the default loading rules")
	contentType := flag.String("content-type", "", "rest.Config ContentType ('' is JSON)")
	accept := flag.String("accept", "", "rest.Config AcceptContentTypes ('' is ContentType alone)")
	flag.Parse()

	config, err := load(*kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clientgo: kubeconfig:", err)
		os.Exit(2)
	}
	// What the kubeconfig made of the transport: the server, and whether TLS is verified.
	emit(map[string]any{
		"event": "config", "host": config.Host, "insecure": config.Insecure,
		"caFile": config.CAFile, "hasCA": len(config.CAData) > 0 || config.CAFile != "",
		"bearer": config.BearerToken != "" || config.BearerTokenFile != "",
	})
	config.ContentType = *contentType
	config.AcceptContentTypes = *accept
	config.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return exchanges{rt} }
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clientgo: client:", err)
		os.Exit(2)
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		emit(map[string]any{"event": "watch-error", "error": err.Error(), "expired": apierrors.IsResourceExpired(err) || apierrors.IsGone(err)})
	}); err != nil {
		fmt.Fprintln(os.Stderr, "clientgo: watch error handler:", err)
		os.Exit(2)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { podEvent("add", obj) },
		UpdateFunc: func(_, obj any) { podEvent("update", obj) },
		DeleteFunc: func(obj any) { podEvent("delete", obj) },
	}); err != nil {
		fmt.Fprintln(os.Stderr, "clientgo: handler:", err)
		os.Exit(2)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	go func() {
		if cache.WaitForCacheSync(stop, informer.HasSynced) {
			emit(map[string]any{"event": "synced"})
		}
	}()

	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		switch strings.TrimSpace(lines.Text()) {
		case "store":
			pods := []podRecord{}
			for _, obj := range informer.GetStore().List() {
				pods = append(pods, record(obj.(*v1.Pod)))
			}
			emit(map[string]any{"event": "store", "pods": sorted(pods), "lastSyncResourceVersion": informer.LastSyncResourceVersion()})
		case "list":
			list(client)
		case "quit":
			close(stop)
			factory.Shutdown()
			return
		}
	}
	// stdin closed: the test is gone; do not outlive it.
	close(stop)
}
