/**
 * What the bench does to the env: namespaces, bulk creation of Pods and AppServices with bounded
 * concurrency, the apiserver's /metrics (with the admin kubeconfig's client certificate) and an
 * operator's /metrics.
 */
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { KubeClient, Namespaces, Pods, installCrds, type KubeObject } from "opkit";
import { readManifests } from "opkit/testenv";
import { realisticPod } from "./pods.ts";

/** Run `fn` over 0..count-1 with at most `concurrency` in flight. */
export async function pool(
  count: number,
  concurrency: number,
  fn: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, () => worker()));
}

/** Create the namespace unless it exists. */
/** Install the AppService CRD (both operators use the same one) and wait until it is served. */
export async function installAppServiceCrd(kubeconfig: string, root: string): Promise<void> {
  const client = await adminClient(kubeconfig);
  try {
    await installCrds(
      client,
      await readManifests(`${root}/operators/appservice/config/crds/appservices.kosmos.io.yaml`),
    );
  } finally {
    await client.close();
  }
}

export async function ensureNamespace(client: KubeClient, name: string): Promise<void> {
  if (await client.getOptional(Namespaces, name)) return;
  await client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
}

/** Make `namespace` hold at least `count` bench Pods (pod-0 .. pod-<count-1>), creating the missing ones. */
export async function ensurePods(client: KubeClient, namespace: string, count: number): Promise<void> {
  await ensureNamespace(client, namespace);
  const have = new Set((await client.listAll(Pods, { namespace })).items.map((p) => p.metadata.name ?? ""));
  const missing: number[] = [];
  for (let i = 0; i < count; i++) if (!have.has(`pod-${i}`)) missing.push(i);
  await pool(missing.length, 32, async (k) => {
    const i = missing[k]!;
    await client.create(realisticPod(namespace, `pod-${i}`, i));
  });
}

/** Delete the namespaces and wait until they are gone (their objects with them). */
export async function deleteNamespaces(
  client: KubeClient,
  names: readonly string[],
  timeoutMs: number,
): Promise<void> {
  for (const n of names) {
    try {
      await client.delete(Namespaces, n);
    } catch {
      /* already gone */
    }
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = [];
    for (const n of names) if (await client.getOptional(Namespaces, n)) left.push(n);
    if (left.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`namespaces not gone after ${timeoutMs} ms: ${left.join(", ")}`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/** The admin kubeconfig's server and TLS material (inline data, as `opkit env` writes it). */
function credentials(kubeconfig: string) {
  const text = readFileSync(kubeconfig, "utf8");
  const field = (name: string) => {
    const m = new RegExp(`${name}: (\\S+)`).exec(text);
    if (!m) throw new Error(`${kubeconfig}: no ${name}`);
    return m[1]!;
  };
  const b64 = (name: string) => Buffer.from(field(name), "base64");
  return {
    server: field("server"),
    ca: b64("certificate-authority-data"),
    cert: b64("client-certificate-data"),
    key: b64("client-key-data"),
  };
}

/** The apiserver's /metrics text. */
export function apiserverMetrics(kubeconfig: string): Promise<string> {
  const c = credentials(kubeconfig);
  return new Promise((resolve, reject) => {
    const req = request(new URL("/metrics", c.server), { ca: c.ca, cert: c.cert, key: c.key }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => resolve(Buffer.concat(chunks).toString()));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** An operator's /metrics text over plain HTTP. */
export async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  return res.text();
}

/** Load an admin client of the env. */
export function adminClient(kubeconfig: string): Promise<KubeClient> {
  return KubeClient.load({ kubeconfig });
}

/** An AppService (kosmos.io/v1) as seed 001's sample, one pod. */
export function appService(namespace: string, name: string, size: number): KubeObject {
  return {
    apiVersion: "kosmos.io/v1",
    kind: "AppService",
    metadata: { name, namespace, labels: { bench: "converge" } },
    spec: { size, image: "nginx:1.7.9", ports: [{ port: 80, targetPort: 80, protocol: "TCP" }] },
  } as KubeObject;
}
