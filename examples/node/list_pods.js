// List a node's pods, then follow changes, over the Pods API socket, from Node.js.
//
//   npm install && node list_pods.js [SOCKET]   # default: $PODS_API_SOCKET, else the kubelet's socket
//
// It calls the documentation's `Pods` service, whose messages carry v1.Pod as a message (the
// kubelet's `v1alpha1.Pods` carries each pod as bytes), so proto-loader decodes pods for us.
// pods-api serves both; the .proto files are the repository's proto/ folder.
"use strict";

const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const socket = process.argv[2] || process.env.PODS_API_SOCKET || "/var/lib/kubelet/pods-api/pods-api.sock";

const definition = protoLoader.loadSync("pods_doc.proto", {
  includeDirs: [path.join(__dirname, "..", "..", "proto")],
  keepCase: true, // the field names are Kubernetes' JSON names already: podIPs, not podIps
  enums: String,
  longs: String,
  defaults: false, // leave unset fields out, as Kubernetes JSON does
});
const { Pods } = grpc.loadPackageDefinition(definition);
const client = new Pods(`unix:${socket}`, grpc.credentials.createInsecure());

// The field mask: only these paths (name, namespace and uid always come along).
const metadata = new grpc.Metadata();
metadata.set("x-kubernetes-fieldmask", "status.phase,status.podIPs");

function phase(pod) {
  return (pod.status && pod.status.phase) || "";
}

client.ListPods({}, metadata, (err, response) => {
  if (err) {
    // FAILED_PRECONDITION (9): the server's sources have not synced yet; retry.
    console.error(`ListPods on ${socket}: ${grpc.status[err.code]}: ${err.details}`);
    process.exit(1);
  }
  for (const pod of response.pods) {
    console.log(pod.metadata.namespace, pod.metadata.name, phase(pod));
  }
  const watch = client.WatchPods({}, metadata);
  watch.on("data", (event) => {
    if (event.type === "INITIAL_SYNC_COMPLETE") {
      console.log(event.type); // no pod: the snapshot is complete
      return;
    }
    // A DELETED pod carries only its name, namespace and uid, as the kubelet sends it.
    console.log(event.type, event.pod.metadata.namespace, event.pod.metadata.name, phase(event.pod));
  });
  watch.on("error", (err) => {
    console.error(`WatchPods on ${socket}: ${grpc.status[err.code]}: ${err.details}`);
    process.exit(1);
  });
});
