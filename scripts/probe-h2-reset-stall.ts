/**
 * Probe (not a test: it is a race, and a stalled run costs its 10 s watchdog): how often a streamed list
 * whose connection is reset while the client is busy decoding stalls instead of failing, over HTTP/2.
 * Each trial lists 40 ConfigMaps of ~80 KiB through a TCP proxy and resets every proxied connection from
 * inside the third item's callback; a list that has neither failed nor ended after 10 s is a stall.
 *
 *   OPKIT_TEST_ENV=<env> node --conditions=opkit-source scripts/probe-h2-reset-stall.ts [trials]
 *   NODE_DEBUG_NATIVE=HTTP2SESSION,TLSWRAP ... shows the mechanism in a stalled trial (see below).
 *
 * opkit's client has spoken HTTP/1.1 since (partly for this), so the probe now shows no stall: run against
 * a client that negotiates HTTP/2 to see it again.
 *
 * The cause is in Node (seen on 24.21.0), not in undici or opkit. The reset reaches the client while its
 * TLS socket still holds ciphertext read before it, so the HTTP/2 session goes on decoding and, as the
 * body is consumed, writes WINDOW_UPDATE frames. The first such write fails synchronously with ECONNRESET:
 * TLSWrap::EncOut reports the error but leaves `write_size_` set, and Http2Session takes the failed write
 * as finished without closing. The next write then finds TLSWrap "write currently in progress" and never
 * completes; meanwhile Http2Session stops reading while a write is in progress (MaybeStopReading), so the
 * ECONNRESET a read would report is never seen either. No 'error' or 'close' reaches the session, socket
 * or stream; a PING is queued behind the stuck write. Only a timer ends it: the request's body timeout
 * (opkit's idle timeout, 60 s for a list), on which opkit drops the connections (else the next request
 * waited for undici's probe PING of the stuck session, one more idle timeout).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { KubeClient, kindRef, type KubeObject } from "opkit";
import { useTestEnv } from "opkit/testenv";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");

const trials = Number(process.argv[2] ?? 30);
const env = await useTestEnv();
const ns = await env.namespace("h2stall");
for (let i = 0; i < 40; i += 10)
  await Promise.all(
    Array.from({ length: 10 }, (_, j) =>
      env.client.create<ConfigMap>({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `cm-${i + j}`, namespace: ns },
        data: { big: 'x\\"'.repeat(16_000) },
      }),
    ),
  );
const { proxy, kubeConfig } = await env.apiserverProxy();
let stalls = 0;
for (let t = 0; t < trials; t++) {
  const client = await KubeClient.fromConfig(kubeConfig, {});
  const watchdog = new AbortController();
  const timer = setTimeout(() => watchdog.abort(), 10_000);
  const started = performance.now();
  let items = 0;
  let outcome = "ended";
  try {
    await client.list(ConfigMaps, {
      namespace: ns,
      signal: watchdog.signal,
      onItem: () => {
        // A consumer with a little work per item, and the reset in the middle of it.
        const until = performance.now() + 2;
        while (performance.now() < until);
        if (++items === 3) proxy.dropAll();
      },
    });
  } catch (err) {
    outcome = watchdog.signal.aborted ? "STALL" : (err as Error).name;
  }
  clearTimeout(timer);
  if (outcome === "STALL") stalls++;
  console.log(`trial ${t}: ${outcome} after ${(performance.now() - started).toFixed(0)} ms, ${items} items`);
  await client.close();
  await sleep(50);
}
console.log(`${stalls} of ${trials} trials stalled (${process.version})`);
await proxy.close();
await env.cleanup();
