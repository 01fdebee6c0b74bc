/**
 * `make demo`: a real local control plane and every seed operator converging in front of you.
 *
 * Starts env "demo" (etcd, kube-apiserver, controller-manager, scheduler, kwok nodes), installs each
 * seed operator's generated CRDs, runs each operator as its own process (as each is deployed: its own
 * flags, its own leader election, and one crashing cannot take the others down), applies the seeds'
 * samples and redraws one table until every sample converged. Exits 0 only then; otherwise 1 with each
 * unconverged object's conditions and last Warning Event. Every process it started is stopped at the end,
 * the env too, unless KEEP=1: then the env and the operators keep running (`make demo-down` stops them).
 */
import { openSync, readFileSync } from "node:fs";
import { readdir, writeFile } from "node:fs/promises";
import { spawn } from "node:child_process";
import { clearScreenDown, moveCursor } from "node:readline";
import { fileURLToPath } from "node:url";
import { LocalWebhooks, kindRef, type KindRef, type KubeClient, type KubeObject } from "opkit";
import { ControlPlane, binDir, eventually, readManifests, startOperatorProcess } from "opkit/testenv";
import type { DemoContext, DemoEntry, DemoRow } from "./demo/entry.ts";
import { demo as acmeNamespace } from "./acme-namespace/demo.ts";
import { demo as appservice } from "./appservice/demo.ts";
import { demo as jobwatcher } from "./jobwatcher/demo.ts";
import { demo as memcached } from "./memcached/demo.ts";
import { demo as scheduler } from "./scheduler/demo.ts";
import { demo as webapp } from "./webapp/demo.ts";

const entries: DemoEntry[] = [appservice, memcached, jobwatcher, acmeNamespace, webapp, scheduler];
const keep = process.env.KEEP === "1";
const timeoutS = Number(process.env.DEMO_TIMEOUT_S ?? 300);
const namespace = "demo";
const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));
const Events = kindRef<KubeObject & EventFields>("v1", "Event");
interface EventFields {
  type?: string;
  reason?: string;
  message?: string;
  involvedObject?: { name?: string; kind?: string };
  lastTimestamp?: string;
  eventTime?: string;
}

/** A started operator: how to stop it, and whether it is still alive. */
interface Running {
  name: string;
  pid: number;
  alive(): boolean;
  stop(): Promise<unknown>;
  tail(): string;
}

const t0 = Date.now();
const elapsed = (): string => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
const cp = new ControlPlane("demo");
const running: Running[] = [];
let client: KubeClient | undefined;
let cleaning: Promise<void> | undefined;

async function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await client?.close();
    if (keep) return;
    await Promise.all(running.map((r) => r.stop()));
    await cp.down();
  })();
  return cleaning;
}

process.on("SIGINT", () => {
  console.log("\ninterrupted: stopping what the demo started");
  void cleanup().then(() => process.exit(130));
});

function startOperator(e: DemoEntry, args: string[]): Running {
  const main = here(`./${e.name}/src/main.ts`);
  if (!keep) {
    const p = startOperatorProcess(main, { args });
    void p.exited.then(() => exitedPids.add(p.pid));
    return {
      name: e.name,
      pid: p.pid,
      alive: () => !exitedPids.has(p.pid),
      stop: () => p.stop(),
      tail: () => p.tail(20),
    };
  }
  // KEEP=1: the operator outlives this script, so it is detached, logs to a file in the env's folder,
  // and its PID is recorded for `make demo-down`.
  const log = `${cp.dir}/demo-${e.name}.log`;
  const fd = openSync(log, "a");
  const child = spawn(process.execPath, ["--conditions=opkit-source", main, ...args], {
    detached: true,
    stdio: ["ignore", fd, fd],
  });
  child.unref();
  const pid = child.pid ?? -1;
  child.on("exit", () => exitedPids.add(pid));
  return {
    name: e.name,
    pid,
    alive: () => !exitedPids.has(pid),
    stop: async () => {
      if (!exitedPids.has(pid)) process.kill(pid, "SIGTERM");
    },
    tail: () => readFileSync(log, "utf8").split("\n").slice(-20).join("\n"),
  };
}
const exitedPids = new Set<number>();

function table(rows: readonly (DemoRow & { operator: string; event: string })[]): string[] {
  const cols = process.stdout.columns || 120;
  const fit = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s.padEnd(n));
  const lines = [
    `${fit("OPERATOR", 12)} ${fit("OBJECT", 34)} ${fit("STATE", 28)} ${fit("CHILDREN", 26)} LAST EVENT`,
  ];
  for (const r of rows)
    lines.push(
      `${fit(r.operator, 12)} ${fit(r.object, 34)} ${fit((r.converged ? "✓ " : "… ") + r.state, 28)} ${fit(r.children, 26)} ${r.event}`,
    );
  return lines.map((l) => (l.length > cols ? `${l.slice(0, cols - 1)}…` : l));
}

async function lastEvent(c: KubeClient, row: DemoRow, type?: string): Promise<EventFields | undefined> {
  if (!row.ref) return undefined;
  const list = await c.list(Events, {
    namespace: row.ref.namespace ?? "default",
    fieldSelector: `involvedObject.name=${row.ref.name},involvedObject.kind=${row.ref.kind.kind}`,
  });
  const when = (e: EventFields): string => e.lastTimestamp ?? e.eventTime ?? "";
  return list.items
    .filter((e) => type === undefined || e.type === type)
    .sort((a, b) => when(a).localeCompare(when(b)))
    .at(-1);
}

async function explain(c: KubeClient, row: DemoRow): Promise<string[]> {
  const out: string[] = [];
  if (row.ref) {
    type WithConditions = KubeObject & {
      status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
    };
    const kind = row.ref.kind as KindRef<WithConditions>;
    const opts = row.ref.namespace === undefined ? {} : { namespace: row.ref.namespace };
    const obj = await c.get(kind, row.ref.name, opts).catch(() => undefined);
    for (const cond of obj?.status?.conditions ?? [])
      if (cond.status !== "True" || cond.type === "Conflict" || cond.type === "Degraded")
        out.push(`condition ${cond.type}=${cond.status} ${cond.reason ?? ""}: ${cond.message ?? ""}`);
    const warning = await lastEvent(c, row, "Warning");
    if (warning) out.push(`last Warning Event ${warning.reason ?? ""}: ${warning.message ?? ""}`);
  }
  return out.length > 0 ? out : ["no condition or Warning Event explains it"];
}

let drawn = 0;
function draw(lines: string[]): void {
  if (process.stdout.isTTY) {
    // Move back over the previous table and redraw it in place (node:readline handles the terminal).
    if (drawn > 0) moveCursor(process.stdout, 0, -drawn);
    clearScreenDown(process.stdout);
    process.stdout.write(`${lines.join("\n")}\n`);
    drawn = lines.length;
  }
}

let exitCode = 1;
try {
  console.log(
    "opkit demo: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes built from the\n" +
      "official Go modules (the first run built them: minutes, once; later runs reuse ~/.cache/opkit).",
  );
  const up = await cp.up({ nodes: 3, onProgress: (m) => console.log(`  ${m}`) });
  console.log(
    up.alreadyRunning ? `${elapsed()}  control plane already running` : `${elapsed()}  control plane up`,
  );
  client = await cp.client({ fieldManager: "opkit-demo" });
  await client.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } });
  const ctxOf = (e: DemoEntry): DemoContext => ({ client: client!, namespace, dir: here(`./${e.name}`) });

  for (const e of entries) {
    const crds = here(`./${e.name}/config/crds`);
    for (const f of await readdir(crds).catch(() => [] as string[]))
      for (const crd of await readManifests(`${crds}/${f}`)) await client.apply(crd, { force: true });
  }
  client.mapper.invalidate();
  for (const e of entries) {
    const args = [
      "--kubeconfig",
      cp.kubeconfigPath,
      "--metrics-bind-address=127.0.0.1:0",
      "--health-probe-bind-address=127.0.0.1:0",
      "--log-level=warn",
      ...((await e.args?.(ctxOf(e))) ?? []),
    ];
    // Webhooks are served by the operator on a local port with its own certificate, registered with the
    // API server as `opkit run --local-webhooks` does.
    let hooks: LocalWebhooks | undefined;
    if (e.webhooks?.length) {
      hooks = await LocalWebhooks.prepare({ dir: `${cp.dir}/demo-webhooks-${e.name}` });
      args.push(`--webhook-bind-address=127.0.0.1:${hooks.port}`, `--webhook-cert-dir=${hooks.certDir}`);
    }
    running.push(startOperator(e, args));
    if (hooks && e.webhooks) await hooks.register(client, `opkit-demo-${e.name}`, e.webhooks);
  }
  if (keep)
    await writeFile(
      `${cp.dir}/demo-operators.json`,
      JSON.stringify(
        running.map((r) => ({ name: r.name, pid: r.pid, entry: here(`./${r.name}/src/main.ts`) })),
      ),
    );
  console.log(
    `${elapsed()}  CRDs installed; operators started: ${running.map((r) => `${r.name} (pid ${r.pid})`).join(", ")}`,
  );
  // An operator's webhook refuses nothing before it listens, but the API server cannot reach it yet
  // either: retry each sample for a while instead of failing on the first connection refused.
  for (const e of entries)
    await eventually(
      `the ${e.name} samples applied`,
      async () => {
        try {
          await e.apply(ctxOf(e));
          return true;
        } catch (err) {
          if (!/webhook/i.test(String(err))) throw err;
          return false;
        }
      },
      60_000,
      500,
    );
  console.log(`${elapsed()}  the seeds' samples applied in namespace ${namespace}; converging:\n`);

  const deadline = Date.now() + timeoutS * 1000;
  let rows: (DemoRow & { operator: string; event: string })[] = [];
  let lastText = "";
  for (;;) {
    rows = [];
    for (const e of entries)
      for (const r of await e.rows(ctxOf(e))) {
        const ev = await lastEvent(client, r).catch(() => undefined);
        rows.push({ ...r, operator: e.name, event: ev ? `${ev.type ?? ""} ${ev.reason ?? ""}` : "" });
      }
    const lines = table(rows);
    if (process.stdout.isTTY)
      draw([
        ...lines,
        "",
        `${elapsed()}  ${rows.filter((r) => r.converged).length}/${rows.length} converged`,
      ]);
    else if (lines.join("\n") !== lastText) console.log(`${elapsed()}\n${lines.join("\n")}\n`);
    lastText = lines.join("\n");
    const dead = running.filter((r) => !r.alive());
    if (rows.every((r) => r.converged) || dead.length > 0 || Date.now() > deadline) {
      if (dead.length > 0)
        for (const d of dead) console.log(`\noperator ${d.name} exited; its last lines:\n${d.tail()}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }

  const pending = rows.filter((r) => !r.converged);
  if (pending.length === 0 && running.every((r) => r.alive())) {
    exitCode = 0;
    console.log(
      `\n${elapsed()}  every sample converged (${rows.length} objects, ${entries.length} operators).`,
    );
  } else {
    const dead = running.filter((r) => !r.alive()).map((r) => r.name);
    console.log(
      `\n${elapsed()}  ${dead.length > 0 ? `operator ${dead.join(", ")} exited;` : `not converged within ${timeoutS} s;`} still pending:`,
    );
    for (const r of pending) {
      console.log(`  ${r.object} (${r.operator}): ${r.state}`);
      for (const why of await explain(client, r)) console.log(`    ${why}`);
    }
  }
  const kubectl = `${binDir()}/kubectl --kubeconfig ${cp.kubeconfigPath}`;
  console.log("\nLook further:");
  console.log(
    `  ${kubectl} get appservices,memcacheds,jobwatchers,deployments,services,pods -n ${namespace}`,
  );
  console.log(`  ${kubectl} get events -n ${namespace} --sort-by=.lastTimestamp`);
  console.log(
    `  npx opkit run --dir operators/appservice -- --kubeconfig ${cp.kubeconfigPath}   # run one yourself`,
  );
  if (keep)
    console.log(
      `KEEP=1: the env and the operators keep running (logs: ${cp.dir}/demo-<operator>.log). Stop all: make demo-down`,
    );
  else console.log("Stopping the operators and the env (KEEP=1 make demo leaves them running).");
} catch (err) {
  console.error(`demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
} finally {
  await cleanup();
}
process.exit(exitCode);
