/**
 * The TypeScript peer of the cache-memory figure: `@kubernetes/client-node`'s informer holding every
 * Pod of --namespace (all namespaces when absent), synced, then one JSON line (see report.ts).
 */
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from "@kubernetes/client-node";
import { arg, cpuSeconds, report } from "./report.ts";

const kc = new KubeConfig();
const kubeconfig = arg("kubeconfig");
if (kubeconfig) kc.loadFromFile(kubeconfig);
else kc.loadFromDefault();
const namespace = arg("namespace");
const api = kc.makeApiClient(CoreV1Api);
const cpu0 = cpuSeconds();
const t0 = performance.now();
const informer = makeInformer<V1Pod>(
  kc,
  namespace ? `/api/v1/namespaces/${namespace}/pods` : "/api/v1/pods",
  () => (namespace ? api.listNamespacedPod({ namespace }) : api.listPodForAllNamespaces()),
);
informer.on("error", (err: unknown) => {
  process.stderr.write(`informer error: ${String(err)}\n`);
});
await informer.start();
const syncMs = Math.round(performance.now() - t0);
const pods = informer.list().length;
await report({ pods, syncMs, syncCpuSeconds: cpuSeconds() - cpu0 });
if (process.argv.includes("--stay")) await new Promise<void>((r) => process.once("SIGTERM", () => r()));
await informer.stop();
process.exit(0);
