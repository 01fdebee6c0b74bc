/**
 * `make bench`: opkit beside its peers on one local control plane, alternating runs (peer, opkit, peer,
 * opkit), medians and the opkit ÷ peer ratio for every figure; a table on stdout and
 * bench/results/latest.json. It starts its own `opkit env` named "bench" (reusing a running one, which
 * it then leaves running), and stops every process it started, also on failure and Ctrl-C.
 *
 * Environment: FIGURES=a,b (default all), BENCH_N (AppServices for converge, default 1000),
 * BENCH_PODS (cache sizes, default "10000,50000"), BENCH_STARTUP_OBJECTS (Services the operators
 * cache at start-up, default 10000), BENCH_SCHEDULE_PODS (pods to schedule on 100 kwok nodes, default
 * 1000), BENCH_REPS (runs per side, default 2),
 * BENCH_RATE, BENCH_LATENCY_SECONDS and BENCH_LATENCY_OBJECTS (latency: updates/s, default 200, for
 * 10 s, over 20 AppServices), BENCH_GO_BIN (the Go peer, built by make), BENCH_OUT (default
 * bench/results/latest.json), BENCH_ENV (the env's name, default "bench"), BENCH_LOG_DIR (keep the
 * latency runs' operator logs there). The env runs with the
 * ShardedListAndWatch feature gate (the shard figure's server-side filtering; the others do not use it).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ControlPlane } from "opkit/testenv";
import { installAppServiceCrd } from "./lib/cluster.ts";
import { runConverge } from "./lib/converge.ts";
import { runCacheMemory } from "./lib/cachememory.ts";
import { runFailover } from "./lib/failover.ts";
import { runLatency } from "./lib/latency.ts";
import { runSchedule } from "./lib/schedule.ts";
import { runShard } from "./lib/shard.ts";
import { runStartup } from "./lib/startup.ts";
import { decodeEventsPerSecond, queueOpsPerSecond, recordStream } from "./lib/pure.ts";
import { killAll } from "./lib/procs.ts";
import { figure, markdownTable, selectFigures, type Figure, type Results } from "./lib/stats.ts";

const ALL = [
  "queue",
  "decode",
  "cache-memory",
  "startup",
  "converge",
  "latency",
  "failover",
  "shard",
  "schedule",
];
const NOT_YET: Record<string, string> = {};

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const env = (k: string, d: string) => process.env[k]?.trim() || d;
const selected = selectFigures(process.env.FIGURES, ALL);
const reps = Number(env("BENCH_REPS", "2"));
const n = Number(env("BENCH_N", "1000"));
const podSizes = env("BENCH_PODS", "10000,50000")
  .split(",")
  .map(Number)
  .filter((x) => x > 0);
const goBin = env("BENCH_GO_BIN", join(process.env.HOME ?? "/root", ".cache/opkit/bench/go-appservice"));
const out = env("BENCH_OUT", join(here, "results/latest.json"));
const envName = env("BENCH_ENV", "bench");
const log = (m: string) => process.stderr.write(`>> ${m}\n`);

const figures: Figure[] = [];
const skipped: Results["skipped"] = [];
const started = new Date();
let plane: ControlPlane | undefined;
let ownEnv = false;

async function cleanup(): Promise<void> {
  killAll();
  if (plane && ownEnv) {
    log(`stopping env "${plane.name}"`);
    ownEnv = false;
    await plane.down();
  }
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    log(`${sig}: stopping what the bench started`);
    void cleanup().finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  const alternate = async (fn: (side: "peer" | "opkit") => Promise<number>) => {
    const runs = { peer: [] as number[], opkit: [] as number[] };
    for (let r = 0; r < reps; r++)
      for (const side of ["peer", "opkit"] as const) runs[side].push(await fn(side));
    return runs;
  };
  if (selected.includes("queue")) {
    const keys = 100_000;
    log(`queue: ${keys} keys, 4 workers`);
    const runs = await alternate(async (side) =>
      side === "peer" ? goQueue(keys) : queueOpsPerSecond(keys, 4),
    );
    figures.push(
      figure({
        name: "queue: add+get+done per second (4 workers, 100k keys)",
        unit: "ops/s",
        opkit: runs.opkit,
        peer: runs.peer,
        peerName: "client-go workqueue",
        target: { on: "value", kind: "min", bound: 1_000_000 },
        parameters: { keys, workers: 4 },
      }),
    );
  }
  if (selected.includes("decode")) {
    const events = 100_000;
    log(`decode: recording ${events} Pod watch events`);
    const lines = recordStream(events, 20_000);
    const runs: number[] = [];
    for (let r = 0; r < reps; r++) runs.push(await decodeEventsPerSecond(lines));
    figures.push(
      figure({
        name: "decode: watch events parsed into the cache per second",
        unit: "events/s",
        opkit: runs,
        target: { on: "value", kind: "min", bound: 30_000 },
        parameters: { events, distinctPods: 20_000 },
      }),
    );
  }
  const cluster = ["cache-memory", "startup", "converge", "latency", "failover", "shard", "schedule"].filter(
    (f) => selected.includes(f),
  );
  if (cluster.length > 0) {
    plane = new ControlPlane(envName);
    ownEnv = !(await plane.isRunning());
    log(ownEnv ? `starting env "${envName}"` : `using the running env "${envName}" (left running)`);
    const up = await plane.up({ featureGates: "ShardedListAndWatch=true", onProgress: (m) => log(m) });
    if (up.alreadyRunning && up.differences.length)
      log(`the running env differs from the bench's settings: ${up.differences.join("; ")}`);
    const kubeconfig = up.kubeconfig;
    if (selected.includes("cache-memory")) {
      figures.push(...(await runCacheMemory({ kubeconfig, goBin, sizes: podSizes, reps, log })));
    }
    if (["startup", "converge", "latency", "failover", "shard"].some((f) => selected.includes(f)))
      await installAppServiceCrd(kubeconfig, root);
    if (selected.includes("startup")) {
      const objects = Number(env("BENCH_STARTUP_OBJECTS", "10000"));
      figures.push(...(await runStartup({ kubeconfig, goBin, root, reps, objects, log })));
    }
    if (selected.includes("converge")) {
      figures.push(...(await runConverge({ kubeconfig, goBin, n, reps, root, log })));
    }
    if (selected.includes("latency")) {
      const rate = Number(env("BENCH_RATE", "200"));
      const seconds = Number(env("BENCH_LATENCY_SECONDS", "10"));
      const apps = Number(env("BENCH_LATENCY_OBJECTS", "20"));
      const update = env("BENCH_LATENCY_UPDATE", "label") === "image" ? "image" : "label";
      figures.push(
        ...(await runLatency({ kubeconfig, goBin, root, reps, rate, seconds, apps, update, log })),
      );
    }
    if (selected.includes("failover")) {
      figures.push(...(await runFailover({ kubeconfig, goBin, reps, root, log })));
    }
    if (selected.includes("shard")) {
      figures.push(...(await runShard({ kubeconfig, goBin, n, reps, root, log })));
    }
    if (selected.includes("schedule")) {
      const pods = Number(env("BENCH_SCHEDULE_PODS", "1000"));
      figures.push(...(await runSchedule({ plane, kubeconfig, root, reps, pods, log })));
    }
  }
  for (const f of selected) if (NOT_YET[f]) skipped.push({ name: f, reason: NOT_YET[f] });
}

function goQueue(keys: number): number {
  const text = execFileSync(goBin, ["--bench-queue", String(keys)], { encoding: "utf8" });
  return (JSON.parse(text.trim().split("\n").pop() ?? "{}") as { opsPerSecond: number }).opsPerSecond;
}

function goVersion(): string {
  try {
    return execFileSync("go", ["version"], { encoding: "utf8" }).trim().split(" ")[2] ?? "";
  } catch {
    return "";
  }
}

let failed: Error | string | undefined;
try {
  await main();
} catch (err) {
  failed = err instanceof Error ? err : String(err);
} finally {
  await cleanup();
}
const results: Results = {
  startedAt: started.toISOString(),
  durationSeconds: Math.round((Date.now() - started.getTime()) / 1000),
  machine: {
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? "",
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100),
    node: process.version,
    go: goVersion(),
  },
  command: `make bench${process.env.FIGURES ? ` FIGURES=${process.env.FIGURES}` : ""}${process.env.BENCH_ENV ? ` BENCH_ENV=${process.env.BENCH_ENV}` : ""} BENCH_N=${n} BENCH_PODS=${podSizes.join(",")} BENCH_REPS=${reps}${process.env.BENCH_RATE ? ` BENCH_RATE=${process.env.BENCH_RATE}` : ""}`,
  figures,
  skipped,
};
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify(results, null, 2) + "\n");
process.stdout.write(`${markdownTable(figures)}\n\n`);
for (const f of figures)
  if (f.parameters.perReplica !== undefined)
    process.stdout.write(
      `${f.name}: per replica ${String(f.parameters.perReplica)} vs ${f.peerValue ?? "–"} (${f.peer ?? ""}); ratio per replica ${String(f.parameters.ratioPerReplica)}\n`,
    );
for (const s of skipped) process.stdout.write(`not measured: ${s.name}: ${s.reason}\n`);
process.stdout.write(
  `\n${results.machine.cores} cores, load ${results.machine.loadAverage.join(" ")}, Node ${results.machine.node}, ${results.machine.go}; ${results.durationSeconds} s; written to ${out}\n`,
);
if (failed) {
  process.stderr.write(
    `bench failed: ${failed instanceof Error ? (failed.stack ?? failed.message) : failed}\n`,
  );
  process.exit(1);
}
