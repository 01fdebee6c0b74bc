/**
 * What the fault suite's tests share: the load (AppServices created and churned), the check that names
 * every object that did not converge, the one report line each test prints, and reading an operator's
 * metrics and memory. It uses opkit's public entries only, like an operator's own tests.
 *
 * Sizes scale with FAULT_SCALE (default 1, CI size); `make soak` runs the same faults longer and larger.
 */
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import {
  AlreadyExistsError,
  KubeApiError,
  Deployments,
  Services,
  scrape,
  type KubeClient,
  type KubeObject,
  type Sample,
} from "opkit";
import { sleep } from "opkit/testenv";
import { AppService, type AppServiceObject } from "../operators/appservice/src/api/v1/appservice.ts";

/** FAULT_SCALE multiplies every load of the suite (1 = the CI size `make test` runs). */
export const SCALE = Math.max(0.1, Number(process.env.FAULT_SCALE ?? "1") || 1);

/** `n` at CI size, scaled by FAULT_SCALE. */
export function scaled(n: number): number {
  return Math.max(1, Math.round(n * SCALE));
}

/** The one line a fault test prints (stdout and the test's diagnostics): load, faults, losses, time. */
export function report(
  name: string,
  fields: { load: string; faults: string; lost: number; startedAt: number; extra?: string },
): string {
  const took = ((Date.now() - fields.startedAt) / 1000).toFixed(1);
  const line =
    `FAULT ${name}: load=${fields.load}; faults=${fields.faults}; lost=${fields.lost}; took=${took}s` +
    (fields.extra ? `; ${fields.extra}` : "");
  console.log(line);
  return line;
}

/** Run `fn` over `items`, at most `limit` at a time. */
export async function pool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Retry a request through an API server that may be restarting (connection refused, 503, 429,
 * timeouts), for up to `timeoutMs`. A create that already happened (its answer lost) counts as done;
 * any other 4xx answer is final and thrown at once.
 */
export async function persist<T>(
  what: string,
  fn: () => Promise<T>,
  timeoutMs = 90_000,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof AlreadyExistsError) return undefined;
      if (err instanceof KubeApiError && err.code >= 400 && err.code < 500 && err.code !== 429) throw err;
      if (Date.now() > deadline)
        throw new Error(`${what}: still failing after ${timeoutMs} ms`, { cause: err });
      await sleep(250);
    }
  }
}

/** What the test last asked of one AppService: the operator must end there. */
export interface Wanted {
  size: number;
  image: string;
}

/** An AppService with `size` pods (0 by default: the load is the operator's, not kwok's). */
export function appService(name: string, namespace: string, want: Wanted): AppServiceObject {
  return AppService.new(
    name,
    {
      size: want.size,
      image: want.image,
      ports: [{ name: "http", port: 8080, targetPort: 80, protocol: "TCP" }],
    },
    { namespace },
  );
}

/** Create `count` AppServices `<prefix>-<i>` in `namespace`; returns what each must converge to. */
export async function createAppServices(
  client: KubeClient,
  namespace: string,
  prefix: string,
  count: number,
  onCreated?: (done: number) => void,
): Promise<Map<string, Wanted>> {
  const wanted = new Map<string, Wanted>();
  for (let i = 0; i < count; i++) wanted.set(`${prefix}-${i}`, { size: 0, image: "registry.local/app:v0" });
  let done = 0;
  await pool([...wanted], 16, async ([name, want]) => {
    await persist(`create AppService ${name}`, () => client.create(appService(name, namespace, want)));
    onCreated?.(++done);
  });
  return wanted;
}

/**
 * Churn: for `durationMs`, change the image of random AppServices at about `perSecond` changes a second,
 * recording each change in `wanted` (the last one written is what must converge). Writes that fail
 * while a fault is active are retried. Returns the number of changes made.
 */
export async function churn(
  client: KubeClient,
  namespace: string,
  wanted: Map<string, Wanted>,
  opts: { durationMs: number; perSecond: number; signal?: AbortSignal },
): Promise<number> {
  const names = [...wanted.keys()];
  const end = Date.now() + opts.durationMs;
  let changes = 0;
  let version = 0;
  const inFlight = new Set<Promise<void>>();
  // One write per object at a time: the API server then stores them in the order they were made, so
  // the last wish recorded is the last write stored.
  const busy = new Set<string>();
  while (Date.now() < end && !opts.signal?.aborted) {
    const name = names[Math.floor(Math.random() * names.length)] as string;
    if (busy.has(name)) continue;
    busy.add(name);
    const image = `registry.local/app:c${++version}`;
    const p = (async () => {
      await persist(`churn ${name}`, () =>
        client.patch(AppService, name, { spec: { image } }, { type: "merge", namespace }),
      );
      (wanted.get(name) as Wanted).image = image;
      changes++;
    })().finally(() => {
      busy.delete(name);
      inFlight.delete(p);
    });
    inFlight.add(p);
    if (inFlight.size >= 8) await Promise.race(inFlight);
    await sleep(1000 / opts.perSecond);
  }
  await Promise.all(inFlight);
  return changes;
}

/**
 * Every way the live state differs from `wanted`, one line per AppService: missing, status behind its
 * generation, no Deployment or more than one, a Deployment with the wrong replicas or image, no Service
 * or more than one. Empty when all converged.
 */
export async function divergence(
  client: KubeClient,
  namespace: string,
  wanted: ReadonlyMap<string, Wanted>,
): Promise<string[]> {
  const [apps, deps, svcs] = await Promise.all([
    client.listAll(AppService, { namespace }),
    client.listAll(Deployments, { namespace }),
    client.listAll(Services, { namespace }),
  ]);
  const owned = <T extends KubeObject>(items: T[]): Map<string, T[]> => {
    const byOwner = new Map<string, T[]>();
    for (const o of items) {
      const uid = o.metadata.ownerReferences?.find((r) => r.controller)?.uid;
      if (uid) byOwner.set(uid, [...(byOwner.get(uid) ?? []), o]);
    }
    return byOwner;
  };
  const depsOf = owned(deps.items);
  const svcsOf = owned(svcs.items);
  const live = new Map(apps.items.map((a) => [a.metadata.name, a]));
  const problems: string[] = [];
  for (const [name, want] of wanted) {
    const app = live.get(name);
    if (!app) {
      problems.push(`${name}: the AppService is missing`);
      continue;
    }
    const uid = app.metadata.uid ?? "";
    const d = depsOf.get(uid) ?? [];
    const s = svcsOf.get(uid) ?? [];
    if (app.spec.image !== want.image)
      problems.push(`${name}: spec.image ${app.spec.image}, the test wrote ${want.image}`);
    if (app.status?.observedGeneration !== app.metadata.generation)
      problems.push(
        `${name}: status.observedGeneration ${app.status?.observedGeneration} ≠ generation ${app.metadata.generation}`,
      );
    if (d.length !== 1) problems.push(`${name}: ${d.length} Deployments owned (want exactly 1)`);
    if (s.length !== 1) problems.push(`${name}: ${s.length} Services owned (want exactly 1)`);
    const dep = d[0];
    if (dep && dep.spec?.replicas !== want.size)
      problems.push(`${name}: Deployment replicas ${dep.spec?.replicas}, want ${want.size}`);
    const image = dep?.spec?.template.spec?.containers[0]?.image;
    if (dep && image !== want.image) problems.push(`${name}: Deployment image ${image}, want ${want.image}`);
  }
  return problems;
}

/** The AppServices (by name) among `problems`. */
export function lostNames(problems: readonly string[]): string[] {
  return [...new Set(problems.map((p) => p.split(":")[0] ?? p))];
}

/**
 * Wait until every AppService converged; on timeout, throw naming each one that did not and why
 * (the first 20 lines), so a failing fault test says what was lost.
 */
export async function converged(
  client: KubeClient,
  namespace: string,
  wanted: ReadonlyMap<string, Wanted>,
  what: string,
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let problems: string[];
  for (;;) {
    problems = await divergence(client, namespace, wanted).catch((err: Error) => [
      `(list failed: ${err.message})`,
    ]);
    if (problems.length === 0) return;
    if (Date.now() > deadline) break;
    await sleep(1_000);
  }
  const lost = lostNames(problems);
  throw new Error(
    `${what}: ${lost.length} of ${wanted.size} AppServices lost (did not converge in ${timeoutMs / 1000} s):\n  ` +
      problems.slice(0, 20).join("\n  ") +
      (problems.length > 20 ? `\n  ... and ${problems.length - 20} more` : ""),
  );
}

/** The operator's metrics port, from its "serving metrics and probes" log line. */
export function metricsPort(line: string): number {
  const port = Number(/"metrics":(\d+)/.exec(line)?.[1]);
  if (!port) throw new Error(`no metrics port in: ${line}`);
  return port;
}

/** Sum of the series `name` whose labels include `match` (a value may be a RegExp). */
export function total(
  samples: readonly Sample[],
  name: string,
  match: Record<string, string | RegExp> = {},
): number {
  return samples
    .filter(
      (s) =>
        s.name === name &&
        Object.entries(match).every(([k, v]) =>
          typeof v === "string" ? s.labels[k] === v : v.test(s.labels[k] ?? ""),
        ),
    )
    .reduce((a, s) => a + s.value, 0);
}

/** Scrape the operator's /metrics. */
export function metrics(port: number): Promise<Sample[]> {
  return scrape(`http://127.0.0.1:${port}/metrics`);
}

/** The write requests (POST, PUT, PATCH, DELETE) the operator has made, from its client metrics. */
export function writes(samples: readonly Sample[]): number {
  return total(samples, "rest_client_requests_total", { method: /^(POST|PUT|PATCH|DELETE)$/ });
}

/** Resident memory of a process in MiB (from /proc), or NaN once it is gone. */
export async function rssMiB(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024;
  } catch {
    return NaN;
  }
}

/**
 * A copy of `kubeconfigPath` (e.g. an operator's impersonating one) whose clusters are reached through
 * 127.0.0.1:`port` (a fault proxy). The API server's certificate is valid for 127.0.0.1 on any port.
 */
export async function kubeconfigThrough(kubeconfigPath: string, port: number): Promise<string> {
  const kc = parse(await readFile(kubeconfigPath, "utf8")) as {
    clusters?: { cluster: { server: string } }[];
  };
  for (const c of kc.clusters ?? []) c.cluster.server = `https://127.0.0.1:${port}`;
  const path = join(await mkdtemp(join(tmpdir(), "opkit-fault-")), "kubeconfig");
  await writeFile(path, stringify(kc), { mode: 0o600 });
  return path;
}
