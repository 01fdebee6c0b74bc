/**
 * cache-memory: each cache (controller-runtime's, opkit's full and metadata-only,
 * client-node's informer) runs as its own process twice, once on an empty namespace and once on a
 * namespace of N realistic Pending Pods; bytes per Pod are (RSS with N − RSS empty) ÷ N, and the heap
 * the same way, and the time each takes to sync the list. Both read built-in kinds as protobuf, which the API
 * server encodes about twice as fast as JSON; the sync is measured once more with both reading JSON, to
 * show what the wire format weighs on each side.
 */
import { join } from "node:path";
import { OPERATOR_NODE_FLAGS } from "opkit/generate";
import { adminClient, ensureNamespace, ensurePods } from "./cluster.ts";
import { start } from "./procs.ts";
import { figure, type Figure } from "./stats.ts";

/** One probe line. */
interface Probe {
  pods: number;
  syncMs: number;
  startMs: number;
  heapBytes: number;
  rssBytes: number;
}

type Impl = "go" | "go-json" | "opkit" | "opkit-json" | "opkit-metadata" | "client-node";
const EMPTY = "bench-empty";
const FULL = "bench-pods";

async function probe(impl: Impl, kubeconfig: string, goBin: string, namespace: string): Promise<Probe> {
  const here = join(import.meta.dirname);
  const p =
    impl === "go" || impl === "go-json"
      ? start(
          goBin,
          [
            "--probe-pods",
            "--namespace",
            namespace,
            ...(impl === "go-json" ? ["--content-type", "application/json"] : []),
          ],
          { env: { KUBECONFIG: kubeconfig } },
        )
      : start(process.execPath, [
          "--expose-gc",
          // opkit's probes run with the Node flags an opkit operator's image and `opkit run` use.
          ...(impl === "client-node" ? [] : OPERATOR_NODE_FLAGS),
          join(here, "..", "probes", impl === "client-node" ? "client-node-cache.ts" : "opkit-cache.ts"),
          "--kubeconfig",
          kubeconfig,
          "--namespace",
          namespace,
          ...(impl === "opkit-metadata" ? ["--metadata-only"] : []),
          ...(impl === "opkit-json" ? ["--json"] : []),
        ]);
  try {
    const line = await p.waitFor(/"event":"probe"/, 900_000);
    return JSON.parse(line) as Probe;
  } finally {
    await p.stop();
  }
}

/** One list of values per implementation. */
function byImpl(): Record<Impl, number[]> {
  return { go: [], "go-json": [], opkit: [], "opkit-json": [], "opkit-metadata": [], "client-node": [] };
}

/** The cache-memory figures for each size. */
export async function runCacheMemory(o: {
  kubeconfig: string;
  goBin: string;
  sizes: readonly number[];
  reps: number;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const client = await adminClient(o.kubeconfig);
  await ensureNamespace(client, EMPTY);
  const figures: Figure[] = [];
  const impls: Impl[] = ["go", "opkit", "opkit-metadata", "client-node"];
  for (const size of [...o.sizes].sort((a, b) => a - b)) {
    o.log(`cache: ${size} Pending Pods in ${FULL}`);
    await ensurePods(client, FULL, size);
    const perPod: Record<Impl, number[]> = byImpl();
    const heapPerPod: Record<Impl, number[]> = byImpl();
    const sync: Record<Impl, number[]> = byImpl();
    for (let r = 0; r < o.reps; r++) {
      for (const impl of impls) {
        const empty = await probe(impl, o.kubeconfig, o.goBin, EMPTY);
        const full = await probe(impl, o.kubeconfig, o.goBin, FULL);
        if (full.pods < size) throw new Error(`${impl} cached ${full.pods} pods, expected ${size}`);
        o.log(
          `  ${impl}: ${full.pods} pods, RSS ${(full.rssBytes / 2 ** 20).toFixed(1)} MiB` +
            ` (empty ${(empty.rssBytes / 2 ** 20).toFixed(1)} MiB)` +
            `, sync ${full.syncMs} ms, start→synced ${full.startMs} ms`,
        );
        perPod[impl].push((full.rssBytes - empty.rssBytes) / full.pods);
        heapPerPod[impl].push((full.heapBytes - empty.heapBytes) / full.pods);
        sync[impl].push(full.syncMs / 1000);
      }
      // Both reading JSON: only their sync time.
      for (const impl of ["go-json", "opkit-json"] as const) {
        const json = await probe(impl, o.kubeconfig, o.goBin, FULL);
        o.log(`  ${impl}: ${json.pods} pods, sync ${json.syncMs} ms`);
        sync[impl].push(json.syncMs / 1000);
      }
    }
    const params = { pods: size, reps: o.reps };
    figures.push(
      figure({
        name: `cache-memory: RSS per Pod, ${size} Pods, default`,
        unit: "bytes",
        opkit: perPod.opkit,
        peer: perPod.go,
        target: { on: "ratio", kind: "max", bound: 1 },
        parameters: params,
      }),
      figure({
        name: `cache-memory: RSS per Pod, ${size} Pods, metadata-only (vs Go's full cache)`,
        unit: "bytes",
        opkit: perPod["opkit-metadata"],
        peer: perPod.go,
        target: { on: "ratio", kind: "max", bound: 0.5 },
        parameters: params,
      }),
      figure({
        name: `cache-memory: RSS per Pod, ${size} Pods, default vs client-node`,
        unit: "bytes",
        opkit: perPod.opkit,
        peer: perPod["client-node"],
        peerName: "client-node informer",
        target: { on: "ratio", kind: "max", bound: 0.5 },
        parameters: params,
      }),
      figure({
        name: `cache-memory: heap per Pod, ${size} Pods, default`,
        unit: "bytes",
        opkit: heapPerPod.opkit,
        peer: heapPerPod.go,
        parameters: params,
      }),
      figure({
        name: `cache: time to sync ${size} Pods`,
        unit: "s",
        opkit: sync.opkit,
        peer: sync.go,
        target: { on: "ratio", kind: "max", bound: 1 },
        parameters: params,
      }),
      figure({
        name: `cache: time to sync ${size} Pods, both reading JSON`,
        unit: "s",
        opkit: sync["opkit-json"],
        peer: sync["go-json"],
        peerName: "controller-runtime over JSON",
        parameters: params,
      }),
    );
  }
  return figures;
}
