// node informer.mjs KUBECONFIG: list every pod ("listed NAME..."), then run an informer over
// them, printing "synced" once it has listed and "EVENT NAME PHASE" for each change after that.
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const api = kc.makeApiClient(k8s.CoreV1Api);
const listed = await api.listPodForAllNamespaces();
console.log('listed ' + listed.items.map((p) => p.metadata.name).join(' '));

const informer = k8s.makeInformer(kc, '/api/v1/pods', () => api.listPodForAllNamespaces());
let synced = false;
for (const [event, word] of [['add', 'ADDED'], ['update', 'MODIFIED'], ['delete', 'DELETED']]) {
  informer.on(event, (pod) => {
    if (synced) console.log(`${word} ${pod.metadata.name} ${pod.status?.phase}`);
  });
}
informer.on('error', (err) => {
  console.log(`error ${err}`);
  process.exit(1);
});
await informer.start();
synced = true;
console.log('synced');
