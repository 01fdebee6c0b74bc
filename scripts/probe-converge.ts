/**
 * Probe (not the `make bench` harness): runs the AppService operator as its own process against an
 * `opkit env`, prints its start-up CPU to ready and idle RSS, then creates N AppServices (size 1) and
 * prints, once all are converged, the operator's requests (its rest_client_requests_total), the
 * AppService status writes (apiserver_request_total for appservices/status: only the operator writes
 * them), its CPU seconds and its peak RSS (VmHWM).
 *
 *   KUBECONFIG=~/.cache/opkit/envs/<env>/kubeconfig node --conditions=opkit-source scripts/probe-converge.ts [N]
 */
import { spawn } from "node:child_process";
import { request } from "node:https";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { KubeClient, Namespaces, type KubeObject } from "opkit";

const N = Number(process.argv[2] ?? 100);
const NS = 10;
const root = fileURLToPath(new URL("..", import.meta.url));
const client = await KubeClient.load();
const APPS = { apiVersion: "kosmos.io/v1", kind: "AppService" };
const CLK = 100; // USER_HZ

function procStat(pid: number): { cpu: number; rss: number; hwm: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
  return { cpu: (Number(stat[11]) + Number(stat[12])) / CLK, rss: kb("VmRSS"), hwm: kb("VmHWM") };
}
async function text(url: string): Promise<string | undefined> {
  try {
    const r = await fetch(url);
    return r.ok ? await r.text() : undefined;
  } catch {
    return undefined;
  }
}
function sum(metrics: string, name: string, filter: (line: string) => boolean = () => true): number {
  return metrics
    .split("\n")
    .filter((l) => l.startsWith(name) && filter(l))
    .reduce((s, l) => s + Number(l.split(" ").at(-1)), 0);
}
const kc = parse(readFileSync(process.env.KUBECONFIG ?? "", "utf8")) as {
  clusters: { cluster: Record<string, string> }[];
  users: { user: Record<string, string> }[];
};
const b64 = (s: string | undefined) => Buffer.from(s ?? "", "base64");
function apiserverMetrics(): Promise<string> {
  const { cluster } = kc.clusters[0]!;
  const { user } = kc.users[0]!;
  return new Promise((resolve, reject) => {
    const req = request(
      `${cluster.server}/metrics`,
      {
        ca: b64(cluster["certificate-authority-data"]),
        cert: b64(user["client-certificate-data"]),
        key: b64(user["client-key-data"]),
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve(body));
      },
    );
    req.on("error", reject);
    req.end();
  });
}
async function apiserverStatusWrites(): Promise<number> {
  const m = await apiserverMetrics();
  return sum(
    m,
    "apiserver_request_total{",
    (l) =>
      l.includes('resource="appservices"') &&
      l.includes('subresource="status"') &&
      !l.includes('verb="GET"') &&
      !l.includes('verb="WATCH"'),
  );
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The CRD, and a clean slate.
await client.apply(
  parse(
    readFileSync(`${root}/operators/appservice/config/crds/appservices.kosmos.io.yaml`, "utf8"),
  ) as KubeObject,
  { fieldManager: "probe", force: true },
);
for (let i = 0; i < NS; i++) {
  await client.apply(
    { apiVersion: "v1", kind: "Namespace", metadata: { name: `probe-${i}` } },
    { fieldManager: "probe", force: true },
  );
}
await sleep(2000);

const t0 = performance.now();
const op = spawn(
  process.execPath,
  [
    `${root}/operators/appservice/src/main.ts`,
    "--metrics-bind-address",
    ":18480",
    "--health-probe-bind-address",
    ":18481",
    "--log-level",
    "warn",
  ],
  { stdio: ["ignore", "ignore", "inherit"], env: process.env },
);
const pid = op.pid!;
try {
  while (!(await text("http://127.0.0.1:18481/readyz"))) await sleep(10);
  const ready = procStat(pid);
  console.log(
    `ready after ${((performance.now() - t0) / 1000).toFixed(2)} s wall, start-up CPU ${ready.cpu.toFixed(2)} s, RSS ${ready.rss.toFixed(0)} MiB`,
  );
  await sleep(5000);
  const idle = procStat(pid);
  console.log(`idle RSS ${idle.rss.toFixed(0)} MiB (peak so far ${idle.hwm.toFixed(0)})`);
  const writes0 = await apiserverStatusWrites();
  const req0 = sum((await text("http://127.0.0.1:18480/metrics")) ?? "", "rest_client_requests_total{");

  const tc = performance.now();
  await Promise.all(
    Array.from({ length: N }, (_, i) =>
      client.create({
        apiVersion: "kosmos.io/v1",
        kind: "AppService",
        metadata: { name: `app-${i}`, namespace: `probe-${i % NS}` },
        spec: { size: 1, image: "nginx", ports: [{ port: 80, targetPort: 80 }] },
      } as KubeObject),
    ),
  );
  for (;;) {
    const list = await client.listAll(APPS);
    const done = list.items.filter((a) => {
      const s = (
        a as { status?: { availableReplicas?: number; conditions?: { type: string; status: string }[] } }
      ).status;
      return (
        s?.availableReplicas === 1 && s.conditions?.some((c) => c.type === "Ready" && c.status === "True")
      );
    }).length;
    if (done === N) break;
    if (performance.now() - tc > 600_000) throw new Error(`only ${done} of ${N} converged`);
    await sleep(1000);
  }
  const conv = (performance.now() - tc) / 1000;
  await sleep(3000); // let trailing reconciles finish
  const end = procStat(pid);
  const metrics = (await text("http://127.0.0.1:18480/metrics")) ?? "";
  const writes = (await apiserverStatusWrites()) - writes0;
  const reqs = sum(metrics, "rest_client_requests_total{") - req0;
  const byMethod = ["GET", "POST", "PATCH", "PUT", "DELETE"]
    .map((m) => `${m} ${sum(metrics, "rest_client_requests_total{", (l) => l.includes(`method="${m}"`))}`)
    .join(", ");
  console.log(
    `N=${N}: converged in ${conv.toFixed(1)} s; status writes ${writes} (${(writes / N).toFixed(2)}/object); operator requests ${reqs} (${byMethod}); CPU create→converged ${(end.cpu - idle.cpu).toFixed(2)} s; peak RSS ${end.hwm.toFixed(0)} MiB`,
  );
  console.log(
    `reconciles: ${metrics
      .split("\n")
      .filter((l) => l.startsWith("controller_runtime_reconcile_total{"))
      .join("; ")}`,
  );
} finally {
  op.kill("SIGTERM");
  for (let i = 0; i < NS; i++) await client.delete(Namespaces, `probe-${i}`).catch(() => undefined);
}
