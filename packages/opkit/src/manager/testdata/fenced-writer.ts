/**
 * For the write-fence tests: a leader-elected manager whose leader runnable writes a ConfigMap in a loop
 * (its identity and a counter) and, like careless user code, ignores its AbortSignal: only the client's
 * fence can keep it from writing once leadership may be lost. Each write has its own 1 s timeout, so a
 * write hung on a dead connection does not stall the loop.
 *
 * Run as a process (`node fenced-writer.ts <kubeconfig> <namespace> <lease> <configmap> <identity>`), it
 * prints "leading" once it leads and "fenced <n>" for each write the fence refused or cut, and keeps
 * running after leadership is lost (a long graceful shutdown) until SIGTERM.
 */
import { fileURLToPath } from "node:url";
import { KubeClient, Manager, createLogger, type LeaderElectionOptions } from "../../index.ts";

/** Short timings, as the leader election integration tests use. */
export const TIMINGS = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 } as const;

/** What a writer did, as it saw it. */
export interface WriterStats {
  /** Writes the server answered. */
  written: number;
  /** Writes the fence refused before sending. */
  fenced: number;
  /** Writes the fence cut in flight. */
  cut: number;
  /** Other failures. */
  failed: number;
  /** Attempts that ended, one way or another. */
  attempts: number;
}

/** A manager leading on `lease` whose leader runnable patches `configMap` until `stop`. */
export async function fencedWriter(opts: {
  client: KubeClient;
  namespace: string;
  lease: string;
  configMap: string;
  identity: string;
  onFenced?: (err: Error & { inFlight?: boolean }) => void;
  logLevel?: "info" | "error";
}): Promise<{ manager: Manager; stats: WriterStats; stop: () => Promise<void> }> {
  const stats: WriterStats = { written: 0, fenced: 0, cut: 0, failed: 0, attempts: 0 };
  let running = true;
  let loop: Promise<void> = Promise.resolve();
  const leaderElection: LeaderElectionOptions = {
    name: opts.lease,
    namespace: opts.namespace,
    identity: opts.identity,
    ...TIMINGS,
  };
  const manager = await Manager.create({
    client: opts.client,
    name: `writer-${opts.identity}`,
    metrics: false,
    health: false,
    leaderElection,
    // A long graceful shutdown: the runnable that ignores its signal keeps running meanwhile.
    gracefulShutdownMs: 60_000,
    onLeadershipLost: () => undefined,
    logger: createLogger({ name: `writer-${opts.identity}`, level: opts.logLevel ?? "error" }),
  });
  manager.add({
    name: "writer",
    needLeaderElection: true,
    // Returns only when the loop ends, so a stop waits for it (up to the grace period) with the client open.
    start: () => {
      loop = (async () => {
        for (let n = 0; running; n++) {
          try {
            await manager.client.patch(
              { apiVersion: "v1", kind: "ConfigMap" },
              opts.configMap,
              { data: { writer: opts.identity, n: String(n) } },
              { namespace: opts.namespace, type: "merge", signal: AbortSignal.timeout(1_000) },
            );
            stats.written++;
          } catch (err) {
            // By name: the test runs against a library without the fence once, to see it fail there.
            if (err instanceof Error && err.name === "FencedWriteError") {
              if ((err as { inFlight?: boolean }).inFlight) stats.cut++;
              else stats.fenced++;
              opts.onFenced?.(err);
            } else stats.failed++;
          }
          stats.attempts++;
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      return loop;
    },
  });
  await manager.start();
  return {
    manager,
    stats,
    stop: async () => {
      running = false;
      await loop;
      await manager.stop();
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [kubeconfig, namespace, lease, configMap, identity] = process.argv.slice(2);
  if (!kubeconfig || !namespace || !lease || !configMap || !identity)
    throw new Error("usage: fenced-writer.ts <kubeconfig> <namespace> <lease> <configmap> <identity>");
  const client = await KubeClient.load({ kubeconfig, fieldManager: `writer-${identity}` });
  let fenced = 0;
  const w = await fencedWriter({
    client,
    namespace,
    lease,
    configMap,
    identity,
    logLevel: "info",
    onFenced: () => console.log(`fenced ${++fenced}`),
  });
  const timer = setInterval(() => {
    if (w.manager.leading) {
      console.log("leading");
      clearInterval(timer);
    }
  }, 20);
  process.once("SIGTERM", () => {
    clearInterval(timer);
    void w.stop().then(() => process.exit(0));
  });
}
