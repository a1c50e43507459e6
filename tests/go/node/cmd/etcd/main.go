// A single etcd member for the suite's kube-apiserver: data under -data-dir, clients and peers on
// loopback only, built from the etcd server module kubernetes itself requires.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		log.Fatalf("bad URL %q: %v", s, err)
	}
	return *u
}

func main() {
	dataDir := flag.String("data-dir", "", "where etcd keeps its data")
	client := flag.String("listen-client-url", "http://127.0.0.1:2379", "loopback client URL")
	peer := flag.String("listen-peer-url", "http://127.0.0.1:2380", "loopback peer URL")
	flag.Parse()

	cfg := embed.NewConfig()
	cfg.Name = "lab"
	cfg.Dir = *dataDir
	cfg.LogLevel = "warn"
	cfg.ListenClientUrls = []url.URL{mustURL(*client)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{mustURL(*peer)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: %v", err)
	}
	<-e.Server.ReadyNotify()
	log.Printf("etcd ready on %s", *client)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case err := <-e.Err():
		log.Printf("etcd: %v", err)
	}
	e.Close()
}
