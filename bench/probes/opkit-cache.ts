/**
 * opkit's cache of Pods, for `make bench`'s cache-memory and startup figures: a KubeClient and a Cache
 * holding every Pod of --namespace (all namespaces when absent), full objects or --metadata-only,
 * synced, then one JSON line (see report.ts). --stay keeps it running for sampling; --json reads the Pods as
 * JSON instead of protobuf.
 */
import { Cache, KubeClient, Pods, cacheKind } from "opkit";
import { arg, cpuSeconds, report } from "./report.ts";

const kubeconfig = arg("kubeconfig");
const namespace = arg("namespace");
const metadataOnly = process.argv.includes("--metadata-only");
const protobuf = !process.argv.includes("--json");
const client = await KubeClient.load(kubeconfig ? { kubeconfig, protobuf } : { protobuf });
// The REST mapping of Pods (discovery, which also opens the connection) before the clock starts, as the Go
// probe's GetInformer does before its span: both time start → synced.
await client.mapping(Pods);
const cpu0 = cpuSeconds();
const t0 = performance.now();
const cache = new Cache(client, {
  ...(namespace ? { namespace } : {}),
  kinds: [cacheKind(Pods, { metadataOnly })],
});
cache.informer(Pods);
cache.start();
await cache.waitForSync(600_000);
const syncMs = Math.round(performance.now() - t0);
const pods = cache.list(Pods).length;
await report({ pods, syncMs, syncCpuSeconds: cpuSeconds() - cpu0 });
if (process.argv.includes("--stay")) await new Promise<void>((r) => process.once("SIGTERM", () => r()));
await cache.stop();
process.exit(0);
