/**
 * A leader that may have lost its Lease cannot write, on the real API server: the old leader's writer
 * ignores its AbortSignal (see testdata/fenced-writer.ts), so only the client's write fence stops it.
 * Every write the server accepted is taken from a watch and ordered by resourceVersion (one etcd revision
 * counter for the ConfigMap and the Lease), not by managedFields' one-second timestamps: none of the old
 * leader's may come after the revision at which the new leader took the Lease.
 */
import { after, before, describe, it, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { KubeClient } from "../client/client.ts";
import { Leases } from "../client/builtins.ts";
import type { KubeObject } from "../client/types.ts";
import { startOperatorProcess } from "../testenv/operatorprocess.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { fencedWriter } from "./testdata/fenced-writer.ts";

const WRITER = fileURLToPath(new URL("./testdata/fenced-writer.ts", import.meta.url));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, fn: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!fn()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface Accepted {
  rv: bigint;
  writer: string;
  n: string;
}

/** The writes of the ConfigMap and the holders of the Lease as the server applied them, from watches. */
function record(client: KubeClient, namespace: string, configMap: string, lease: string, fromRv: string) {
  const writes: Accepted[] = [];
  const holders: { rv: bigint; holder: string }[] = [];
  const abort = new AbortController();
  const follow = async <T extends KubeObject>(
    kind: { apiVersion: string; kind: string },
    name: string,
    on: (obj: T, rv: bigint) => void,
  ): Promise<void> => {
    const events = await client.watch<T>(kind, {
      namespace,
      fieldSelector: `metadata.name=${name}`,
      resourceVersion: fromRv,
      allowWatchBookmarks: false,
      timeoutSeconds: 600,
      signal: abort.signal,
    });
    try {
      for await (const ev of events) {
        if (ev.type !== "ADDED" && ev.type !== "MODIFIED") continue;
        on(ev.object, BigInt(ev.object.metadata.resourceVersion ?? "0"));
      }
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    }
  };
  const done = Promise.all([
    follow<KubeObject & { data?: Record<string, string> }>(
      { apiVersion: "v1", kind: "ConfigMap" },
      configMap,
      (cm, rv) => {
        if (cm.data?.writer) writes.push({ rv, writer: cm.data.writer, n: cm.data.n ?? "" });
      },
    ),
    follow<KubeObject & { spec?: { holderIdentity?: string } }>(Leases, lease, (l, rv) =>
      holders.push({ rv, holder: l.spec?.holderIdentity ?? "" }),
    ),
  ]);
  return {
    writes,
    holders,
    count: (writer: string) => writes.filter((w) => w.writer === writer).length,
    leads: (identity: string) => holders.some((h) => h.holder === identity),
    async stop(): Promise<void> {
      abort.abort();
      await done;
    },
  };
}

/** The assertion of both tests: no write of `old` accepted after `successor` took the Lease. */
function assertNoWriteAfterTakeover(
  t: TestContext,
  rec: ReturnType<typeof record>,
  old: string,
  successor: string,
): void {
  const takeover = rec.holders.find((h) => h.holder === successor)?.rv;
  assert.ok(takeover !== undefined, `${successor} never took the Lease`);
  const before = rec.writes.filter((w) => w.writer === old && w.rv < takeover);
  const late = rec.writes.filter((w) => w.writer === old && w.rv > takeover);
  const firstNew = rec.writes.find((w) => w.writer === successor);
  t.diagnostic(
    `${before.length} writes of ${old} before the takeover at rv ${takeover}, ${late.length} after; ` +
      `${rec.count(successor)} of ${successor}, the first at rv ${firstNew?.rv}`,
  );
  assert.ok(before.length > 0, `${old} wrote while it led`);
  assert.ok(firstNew && firstNew.rv > takeover, `${successor} wrote after it took over`);
  assert.deepEqual(
    late.map((w) => `rv ${w.rv}: ${w.writer} #${w.n}`),
    [],
    `writes of the old leader accepted after the takeover at rv ${takeover}`,
  );
}

describe("a leader that may have lost its Lease cannot write (real API server)", { timeout: 180_000 }, () => {
  let env: TestEnv;
  let ns: string;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("fence");
  });
  after(() => env.cleanup());

  async function configMap(name: string): Promise<string> {
    const cm = await env.client.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, namespace: ns },
      data: {},
    });
    return (cm as KubeObject).metadata.resourceVersion ?? "0";
  }

  it("a leader black-holed mid-renewal and healed writes nothing after its successor took over", async (t) => {
    const rec = record(env.client, ns, "blackhole", "blackhole", await configMap("blackhole"));
    const { proxy, kubeConfig } = await env.apiserverProxy();
    const clientA = await KubeClient.fromConfig(kubeConfig, { fieldManager: "writer-a" });
    const clientB = await KubeClient.load({ kubeconfig: env.kubeconfigPath, fieldManager: "writer-b" });
    const common = { namespace: ns, lease: "blackhole", configMap: "blackhole" };
    const a = await fencedWriter({ ...common, client: clientA, identity: "a" });
    const late: { b?: Awaited<ReturnType<typeof fencedWriter>> } = {};
    t.after(async () => {
      proxy.heal();
      await Promise.all([a.stop(), late.b?.stop()]);
      await rec.stop();
      await proxy.close();
    });
    await waitFor("a leads and writes", () => a.manager.leading && rec.count("a") >= 5);
    const b = await fencedWriter({ ...common, client: clientB, identity: "b" });
    late.b = b;
    await sleep(1_000); // b sees a renewing

    // Renewals go every 0.5 s and take a few ms: the black hole freezes what is in flight (a renewal, a
    // write) and every later request.
    proxy.blackhole();
    await waitFor("b leads and writes", () => rec.leads("b") && rec.count("b") >= 3);
    proxy.heal();
    // The old leader's writer goes on (it ignores its signal), now over connections that work again: wait
    // for ten of its writes to end after the heal. (A write that was waiting for a connection into the
    // black hole ends only when undici's 10 s connect timeout fires, whatever its signal says.)
    const healedAt = a.stats.attempts;
    await waitFor(
      "ten writes of the old leader after the heal",
      () => a.stats.attempts >= healedAt + 10,
      30_000,
    );
    const stats = { ...a.stats };
    await a.stop();
    await b.stop();
    await rec.stop();

    assertNoWriteAfterTakeover(t, rec, "a", "b");
    t.diagnostic(`old leader: ${JSON.stringify(stats)}`);
    assert.ok(stats.fenced > 0, "the old leader's writes after the heal were refused by its fence");
  });

  it("a leader paused (SIGSTOP) past its Lease and resumed writes nothing after its successor took over", async (t) => {
    const rec = record(env.client, ns, "paused", "paused", await configMap("paused"));
    const child = startOperatorProcess(WRITER, {
      args: [env.kubeconfigPath, ns, "paused", "paused", "a"],
    });
    const clientB = await KubeClient.load({ kubeconfig: env.kubeconfigPath, fieldManager: "writer-b" });
    const late: { b?: Awaited<ReturnType<typeof fencedWriter>> } = {};
    t.after(async () => {
      // A stopped process keeps SIGTERM pending: continue it first (only the child this test started).
      try {
        process.kill(child.pid, "SIGCONT");
      } catch {
        // already exited
      }
      await child.stop();
      await late.b?.stop();
      await rec.stop();
    });
    await child.waitForLine(/^leading$/);
    await waitFor("a writes", () => rec.count("a") >= 5);
    const b = await fencedWriter({
      namespace: ns,
      lease: "paused",
      configMap: "paused",
      client: clientB,
      identity: "b",
    });
    late.b = b;
    await sleep(1_000);

    process.kill(child.pid, "SIGSTOP");
    await waitFor("b leads and writes", () => rec.leads("b") && rec.count("b") >= 3);
    await sleep(500);
    process.kill(child.pid, "SIGCONT");
    // Resumed, the old leader's timers are all overdue: its writer and its elector race.
    await sleep(3_000);
    await child.stop();
    await b.stop();
    await rec.stop();

    assertNoWriteAfterTakeover(t, rec, "a", "b");
    const fenced = child.output.filter((l) => /^fenced \d+$/.test(l)).length;
    t.diagnostic(`old leader: ${fenced} writes fenced after it resumed`);
    assert.ok(fenced > 0, `the resumed leader's writes were refused by its fence:\n${child.tail(20)}`);
  });
});
