/**
 * schedule: pods bound per second by opkit's custom scheduler (operators/scheduler, seed 004) beside
 * kube-scheduler, alternating (kube-scheduler, opkit, …), on 100 kwok nodes the figure adds
 * (bench-node-0..99, labelled bench.opkit.dev/pool=schedule; removed at the end).
 *
 * Each run creates N pods (default 1,000; small requests; a nodeSelector for the bench nodes) for a
 * scheduler that is not running yet, so they wait Pending with nothing written, then starts that
 * scheduler and notes on its own watch when each pod's spec.nodeName appears. Both schedulers start
 * with the same backlog: opkit's as its image runs it (the `opkit build` bundle that `make bench`
 * builds, with the image's Node flags; else src/main.ts), default profile, log level info, and a
 * second kube-scheduler from the env's binaries serving the profile "bench-kube-scheduler" (the env's
 * own kube-scheduler keeps serving default-scheduler and never sees these pods), its client unthrottled
 * (qps 5000) as opkit's client is. The rate is
 * (N − 1) ÷ (last bind − first bind): the scheduler's pace once it runs, without its start-up, which
 * is printed beside it as process start → last bind.
 */
import { Pods, type KubeClient, type Pod } from "opkit";
import { OPERATOR_NODE_FLAGS } from "opkit/generate";
import { binDir, type ControlPlane } from "opkit/testenv";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminClient, deleteNamespaces, ensureNamespace, pool } from "./cluster.ts";
import { cpuSeconds, freePort, operatorEntry, start, type Proc } from "./procs.ts";
import { bindRate, figure, type Figure } from "./stats.ts";

const NODES = 100;
const OPKIT_SCHEDULER = "opkit-scheduler";
const KUBE_SCHEDULER = "bench-kube-scheduler";
const POOL_LABEL = "bench.opkit.dev/pool";

function pod(namespace: string, name: string, schedulerName: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels: { app: "bench-schedule" } },
    spec: {
      schedulerName,
      nodeSelector: { [POOL_LABEL]: "schedule" },
      containers: [
        {
          name: "c",
          image: "registry.example.com/pause:3.10",
          resources: { requests: { cpu: "10m", memory: "16Mi" } },
        },
      ],
    },
  };
}

/** A second kube-scheduler serving only `schedulerName`, from the env's binaries. */
async function startKubeScheduler(kubeconfig: string, schedulerName: string): Promise<Proc> {
  const dir = mkdtempSync(join(tmpdir(), "bench-kube-scheduler-"));
  const config = join(dir, "config.yaml");
  writeFileSync(
    config,
    [
      "apiVersion: kubescheduler.config.k8s.io/v1",
      "kind: KubeSchedulerConfiguration",
      "clientConnection:",
      `  kubeconfig: ${kubeconfig}`,
      "  qps: 5000",
      "  burst: 10000",
      "leaderElection:",
      "  leaderElect: false",
      "profiles:",
      `  - schedulerName: ${schedulerName}`,
      "",
    ].join("\n"),
  );
  return start(join(binDir(), "kube-scheduler"), [
    `--config=${config}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    `--secure-port=${await freePort()}`,
    "--bind-address=127.0.0.1",
    "--profiling=false",
    "--v=1",
  ]);
}

async function oneRun(
  side: "kube-scheduler" | "opkit",
  run: number,
  o: { kubeconfig: string; root: string; pods: number; client: KubeClient; log: (m: string) => void },
): Promise<{ rate: number; wall: number }> {
  const { client } = o;
  const ns = `bench-sched-${side === "opkit" ? "opkit" : "kube"}-${run}-${Date.now() % 100000}`;
  const schedulerName = side === "opkit" ? OPKIT_SCHEDULER : KUBE_SCHEDULER;
  await ensureNamespace(client, ns);
  const abort = new AbortController();
  let scheduler: Proc | undefined;
  try {
    await pool(o.pods, 16, async (i) => {
      await client.create(pod(ns, `pod-${i}`, schedulerName));
    });
    const list = await client.list(Pods, { namespace: ns });
    const bound = new Map<string, number>();
    let allBound: () => void = () => undefined;
    const done = new Promise<void>((r) => (allBound = r));
    const note = (p: Pod, at: number) => {
      const name = p.metadata.name ?? "";
      if (p.spec?.nodeName && !bound.has(name)) {
        bound.set(name, at);
        if (bound.size >= o.pods) allBound();
      }
    };
    // The apiserver closes a watch whose reader falls behind (kwok's status writes follow every bind):
    // the watch resumes from the last resourceVersion seen; after a 410 a list catches up, and the pods
    // it finds bound are timed at that list (counted in `relisted`).
    let rv = list.metadata?.resourceVersion;
    let resumed = 0;
    let relisted = 0;
    const watching = (async () => {
      while (!abort.signal.aborted && bound.size < o.pods) {
        try {
          const watch = await client.watch(Pods, {
            namespace: ns,
            resourceVersion: rv,
            signal: abort.signal,
          });
          for await (const ev of watch) {
            rv = ev.object.metadata.resourceVersion ?? rv;
            note(ev.object, performance.now());
          }
          resumed++;
        } catch (err) {
          if (abort.signal.aborted) return;
          resumed++;
          o.log(`  ${side}: the watch failed (${String(err)}); listing`);
          const l = await client.list(Pods, { namespace: ns });
          const at = performance.now();
          for (const p of l.items) if (p.spec?.nodeName && !bound.has(p.metadata.name ?? "")) relisted++;
          for (const p of l.items) note(p, at);
          rv = l.metadata?.resourceVersion;
        }
      }
    })();
    const t0 = performance.now();
    scheduler =
      side === "opkit"
        ? start(process.execPath, [
            // As its image runs it (the generated Dockerfile's ENTRYPOINT), like the AppService operator.
            ...OPERATOR_NODE_FLAGS,
            operatorEntry(o.root, "scheduler"),
            "--kubeconfig",
            o.kubeconfig,
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
          ])
        : await startKubeScheduler(o.kubeconfig, KUBE_SCHEDULER);
    let timer: NodeJS.Timeout | undefined;
    const progress = setInterval(() => o.log(`  ${side}: ${bound.size} of ${o.pods} bound`), 15_000);
    await Promise.race([done, new Promise<void>((r) => (timer = setTimeout(r, 600_000))), scheduler.exited]);
    clearTimeout(timer);
    clearInterval(progress);
    // What the scheduler spent to get there (start-up included): on a shared machine its CPU is the API
    // server's loss.
    const cpu = cpuSeconds(scheduler.pid);
    abort.abort();
    // The aborted watch ends its loop; not waited for without bound.
    await Promise.race([watching, new Promise((r) => setTimeout(r, 5000))]);
    if (bound.size < o.pods)
      throw new Error(
        `${side}: ${bound.size} of ${o.pods} pods bound:\n${scheduler.lines.slice(-10).join("\n")}`,
      );
    const times = [...bound.values()];
    const res = { rate: bindRate(times), wall: (Math.max(...times) - t0) / 1000 };
    o.log(
      `  ${side}, run ${run + 1}: ${o.pods} pods bound at ${res.rate.toFixed(1)}/s (first → last bind), ` +
        `${res.wall.toFixed(2)} s from process start to the last bind, ${cpu.toFixed(2)} s CPU; watch resumed ${resumed}×, ${relisted} binds timed by a list`,
    );
    return res;
  } finally {
    abort.abort();
    await scheduler?.stop();
    await deleteNamespaces(client, [ns], 600_000).catch((err: unknown) =>
      o.log(`schedule: ${ns} not deleted: ${String(err)}`),
    );
  }
}

/** The schedule figures (alternating kube-scheduler, opkit) for `pods` pods on 100 kwok nodes. */
export async function runSchedule(o: {
  plane: ControlPlane;
  kubeconfig: string;
  root: string;
  reps: number;
  pods: number;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const client = await adminClient(o.kubeconfig);
  const names = Array.from({ length: NODES }, (_, i) => `bench-node-${i}`);
  try {
    // Fresh nodes with the pool label (any left by an interrupted run are replaced).
    await o.plane.removeNodes(names);
    o.log(`schedule: adding ${NODES} kwok nodes`);
    await o.plane.addNodes(names.map((name) => ({ name, labels: { [POOL_LABEL]: "schedule" } })));
    const runs = {
      kube: [] as { rate: number; wall: number }[],
      opkit: [] as { rate: number; wall: number }[],
    };
    for (let r = 0; r < o.reps; r++) {
      o.log(`schedule: run ${r + 1} of ${o.reps}, ${o.pods} pods on ${NODES} nodes`);
      runs.kube.push(await oneRun("kube-scheduler", r, { ...o, client }));
      runs.opkit.push(await oneRun("opkit", r, { ...o, client }));
    }
    const params = {
      pods: o.pods,
      nodes: NODES,
      reps: o.reps,
      trigger: "node label matching the pods' nodeSelector",
    };
    return [
      figure({
        name: `schedule: pods bound per second, ${o.pods} pods on ${NODES} nodes`,
        unit: "pods/s",
        opkit: runs.opkit.map((r) => r.rate),
        peer: runs.kube.map((r) => r.rate),
        peerName: "kube-scheduler",
        target: { on: "value", kind: "min", bound: 200 },
        parameters: params,
      }),
      figure({
        name: `schedule: scheduler process start → last of ${o.pods} pods bound`,
        unit: "s",
        opkit: runs.opkit.map((r) => r.wall),
        peer: runs.kube.map((r) => r.wall),
        peerName: "kube-scheduler",
        parameters: params,
      }),
    ];
  } finally {
    await o.plane
      .removeNodes(names)
      .catch((err: unknown) => o.log(`schedule: nodes not removed: ${String(err)}`));
    await client.close();
  }
}
