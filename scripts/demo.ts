/**
 * `make demo`: start the local control plane (env "demo"), create a Deployment with 2 replicas and show
 * its pods going from Pending to Running as the watch reports them. The env keeps running afterwards so
 * it can be explored; the last lines say how to use and stop it.
 */
import { kindRef, type KubeObject } from "opkit";
import { ControlPlane, binDir } from "opkit/testenv";

type Pod = KubeObject & { spec?: { nodeName?: string }; status?: { phase?: string } };
const Pods = kindRef<Pod>("v1", "Pod");

const cp = new ControlPlane("demo");
const t0 = Date.now();
const up = await cp.up({ nodes: 3, onProgress: (m) => console.log(`  ${m}`) });
console.log(
  up.alreadyRunning
    ? "control plane already running"
    : `control plane up in ${((Date.now() - t0) / 1000).toFixed(1)}s`,
);

const client = await cp.client({ fieldManager: "opkit-demo" });
const ns = "demo";
await client.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
const labels = { app: "hello" };
const list = await client.list(Pods, { namespace: ns, labelSelector: "app=hello" });
const watch = await client.watch(Pods, {
  namespace: ns,
  labelSelector: "app=hello",
  resourceVersion: list.metadata.resourceVersion,
  timeoutSeconds: 60,
});
await client.apply({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "hello", namespace: ns },
  spec: {
    replicas: 2,
    selector: { matchLabels: labels },
    template: { metadata: { labels }, spec: { containers: [{ name: "hello", image: "nginx:1.27" }] } },
  },
} as KubeObject);
console.log("created Deployment demo/hello with 2 replicas; watching its pods:");
const running = new Set<string>();
for await (const ev of watch) {
  const p = ev.object;
  if (ev.type === "BOOKMARK") continue;
  console.log(
    `  ${ev.type.padEnd(8)} ${String(p.metadata.name).padEnd(28)} phase=${(p.status?.phase ?? "").padEnd(8)} node=${p.spec?.nodeName ?? "-"}`,
  );
  if (p.status?.phase === "Running") running.add(p.metadata.name ?? "");
  if (running.size >= 2) break;
}
await client.close();
console.log(`\n2 pods Running ${((Date.now() - t0) / 1000).toFixed(1)}s after start. The env keeps running:`);
console.log(`  ${binDir()}/kubectl --kubeconfig ${cp.kubeconfigPath} get pods -n demo`);
console.log(`  npx opkit env status --name demo`);
console.log(`  npx opkit env down --name demo      # stops every process`);
process.exit(0);
