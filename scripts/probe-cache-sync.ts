/**
 * Probe (not the `make bench` harness): time for a Cache to list and store every Pod of the cluster,
 * and the RSS and heap it adds. `--create N` first creates N Pending Pods (schedulerName "none", so no
 * scheduler or node touches them) in the namespace probe-pods; `--delete` removes that namespace.
 *
 *   KUBECONFIG=~/.cache/opkit/envs/<env>/kubeconfig node --conditions=opkit-source scripts/probe-cache-sync.ts [--create 10000]
 */
import { Cache, KubeClient, Namespaces, Pods, type Pod } from "opkit";

const client = await KubeClient.load();
const args = process.argv.slice(2);
const NS = "probe-pods";
if (args[0] === "--delete") {
  await client.delete(Namespaces, NS).catch(() => undefined);
  process.exit(0);
}
if (args[0] === "--create") {
  const n = Number(args[1] ?? 10_000);
  await client.apply(
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    { fieldManager: "probe", force: true },
  );
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) {
      await client.create<Pod>({
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: `p-${i}`,
          namespace: NS,
          labels: { app: `app-${i % 100}`, tier: "web" },
          annotations: { "example.com/note": "x".repeat(40) },
        },
        spec: {
          schedulerName: "none",
          containers: [
            {
              name: "main",
              image: "nginx:1.25",
              env: [
                { name: "A", value: "1" },
                { name: "B", value: "2" },
              ],
              resources: {
                requests: { cpu: "100m", memory: "64Mi" },
                limits: { cpu: "200m", memory: "128Mi" },
              },
            },
          ],
        },
      });
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}
global.gc?.();
const m0 = process.memoryUsage();
const t0 = performance.now();
const c0 = process.cpuUsage();
const cache = new Cache(client, { streamingList: process.env.PROBE_STREAMING !== "0" });
cache.informer(Pods);
cache.start();
await cache.waitForSync(300_000);
const wall = performance.now() - t0;
const cpu = process.cpuUsage(c0);
global.gc?.();
const m1 = process.memoryUsage();
const count = cache.list(Pods).length;
console.log(
  `synced ${count} Pods in ${(wall / 1000).toFixed(2)} s (CPU ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s); RSS +${((m1.rss - m0.rss) / 2 ** 20).toFixed(0)} MiB, heap +${((m1.heapUsed - m0.heapUsed) / 2 ** 20).toFixed(0)} MiB (${((m1.heapUsed - m0.heapUsed) / count / 1024).toFixed(1)} KiB per Pod)`,
);
await cache.stop();
await client.close();
