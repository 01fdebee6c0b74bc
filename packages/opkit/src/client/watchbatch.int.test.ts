/**
 * Watches read in batches (typedErrors) against the real server, with a consumer slower than the stream
 * (the body pauses at 1 MiB held) and a connection cut midway: the events handed over are the server's, in
 * its order, none twice; the cut is a ConnectionError; a watch resumed from the last event handed over
 * gives the rest, so the two together are every change exactly once.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { KubeClient } from "./client.ts";
import { ConnectionError } from "./errors.ts";
import { kindRef, type KubeObject, type WatchEvent } from "./types.ts";

const ConfigMaps = kindRef<KubeObject & { data?: Record<string, string> }>("v1", "ConfigMap");
/** Written before the watch (more than the consumer reads before the cut), and after the cut. */
const BEFORE = 500;
const AFTER = 100;
const COUNT = BEFORE + AFTER;

describe("batched watch reading against opkit env", () => {
  let env: TestEnv;
  let ns: string;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("watchbatch");
  });
  after(() => env?.cleanup());

  it("a slow consumer cut midway: a prefix of the server's events, in order, once each; resumed, the rest", async (t) => {
    const { proxy, kubeConfig } = await env.apiserverProxy();
    const client = await KubeClient.fromConfig(kubeConfig);
    t.after(async () => {
      await client.close();
      await proxy.close();
    });
    const start = (await env.client.list(ConfigMaps, { namespace: ns, limit: 1 })).metadata.resourceVersion;
    // ~2.5 MiB of events written before the consumer reads much: the body pauses and resumes.
    const big = "x".repeat(5000);
    const write = (from: number, to: number) =>
      Promise.all(
        Array.from({ length: 10 }, async (_, w) => {
          for (let i = from + w; i < to; i += 10)
            await env.client.create({
              apiVersion: "v1",
              kind: "ConfigMap",
              metadata: { name: `cm-${String(i).padStart(3, "0")}`, namespace: ns },
              data: { big },
            });
        }),
      );
    await write(0, BEFORE);
    const seen: WatchEvent<KubeObject>[] = [];
    const events = await client.watch(ConfigMaps, { namespace: ns, resourceVersion: start });
    await assert.rejects(
      (async () => {
        for await (const ev of events) {
          seen.push(ev);
          if (seen.length === 50) setImmediate(() => proxy.dropAll());
          await sleep(1); // slower than the server
        }
      })(),
      ConnectionError,
    );
    // Over HTTP/1.1 the socket buffers may hold all that was written before, so the cut can come after the
    // last of it: the changes written after the cut are what the resumed watch must bring.
    assert.ok(seen.length >= 50 && seen.length <= BEFORE, `cut after 50 events (${seen.length})`);
    await write(BEFORE, COUNT);
    t.diagnostic(`cut after ${seen.length} events`);
    const rest: WatchEvent<KubeObject>[] = [];
    const last = seen.at(-1)?.object.metadata.resourceVersion;
    const ac = new AbortController();
    const more = await env.client.watch(ConfigMaps, {
      namespace: ns,
      resourceVersion: last,
      signal: ac.signal,
    });
    try {
      for await (const ev of more) {
        rest.push(ev);
        if (seen.length + rest.length === COUNT) break;
      }
    } finally {
      ac.abort();
    }
    const all = [...seen, ...rest];
    assert.ok(all.every((e) => e.type === "ADDED"));
    const rvs = all.map((e) => Number(e.object.metadata.resourceVersion));
    assert.deepEqual(
      rvs,
      [...rvs].sort((a, b) => a - b),
      "in the server's order",
    );
    assert.equal(new Set(all.map((e) => e.object.metadata.name)).size, COUNT, "every change once");
    assert.ok(
      all.every((e) => (e.object as { data?: { big?: string } }).data?.big === big),
      "whole objects",
    );
  });
});
