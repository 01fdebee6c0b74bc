/**
 * Fault test with bad input: N invalid AppServices generated with fast-check (seeded, so a failure is
 * reproducible) are sent to the API server while the AppService operator runs as its own process. Each
 * one is either refused by the API server (the CRD's schema) or, when the schema lets it through but
 * its children cannot exist (a nodePort outside the range, a port name the Service refuses), reported by
 * the operator with Ready=False and a Warning Event. The operator never exits, and its resident memory
 * stays within a bound while it retries them all. Prints one `FAULT ...` line.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { EventsV1, InvalidError } from "opkit";
import { operatorProject, sleep, useTestEnv, type OperatorProject, type TestEnv } from "opkit/testenv";
import { AppService } from "../operators/appservice/src/api/v1/appservice.ts";
import { persist, pool, report, rssMiB, scaled } from "./harness.ts";

const root = fileURLToPath(new URL("../operators/appservice", import.meta.url));
const SEED = Number(process.env.FAULT_SEED ?? "1313");

const port = (over: Record<string, unknown> = {}) => ({
  name: "http",
  port: 8080,
  targetPort: 80,
  protocol: "TCP",
  ...over,
});

/** Specs the CRD's schema refuses. */
const schemaInvalid = fc.oneof(
  fc.record({ size: fc.integer({ max: -1 }), image: fc.constant("nginx") }),
  fc.record({ size: fc.integer({ min: 1001 }), image: fc.constant("nginx") }),
  fc.record({ size: fc.double({ min: 0.1, max: 10, noInteger: true }), image: fc.constant("nginx") }),
  fc.record({ size: fc.string(), image: fc.constant("nginx") }),
  fc.record({ size: fc.nat(5), image: fc.constant("") }),
  fc.record({ size: fc.nat(5) }),
  fc.record({ image: fc.string({ minLength: 1 }) }),
  fc.record({ size: fc.nat(5), image: fc.constant("nginx"), ports: fc.string() }),
  fc.record({
    size: fc.nat(5),
    image: fc.constant("nginx"),
    ports: fc
      .integer({ min: 65, max: 200 })
      .map((n) => Array.from({ length: n }, (_, i) => port({ port: 1000 + i, name: `p${i}` }))),
  }),
  fc.record({
    size: fc.nat(5),
    image: fc.constant("nginx"),
    ports: fc.constant([port(), port({ name: "again" })]),
  }),
);

/** Specs the schema admits but whose Service the API server refuses: only the operator can say so. */
const childInvalid = fc.oneof(
  fc.record({
    size: fc.constant(0),
    image: fc.constant("nginx"),
    ports: fc.integer({ min: 1, max: 29_999 }).map((nodePort) => [port({ nodePort })]),
  }),
  fc.record({
    size: fc.constant(0),
    image: fc.constant("nginx"),
    ports: fc.stringMatching(/^[A-Z_]{2,10}$/).map((name) => [port({ name })]),
  }),
);

describe("faults: bad input to the AppService operator", { timeout: 600_000 }, () => {
  let env: TestEnv;
  let project: OperatorProject;

  before(async () => {
    env = await useTestEnv();
    project = await operatorProject(env, root, { namespace: "fault-badinput" });
  });
  after(async () => {
    await project?.cleanup();
    await env?.cleanup();
  });

  it("N generated invalid AppServices: each refused, or Ready=False with a Warning Event; no crash, bounded memory", async () => {
    const startedAt = Date.now();
    const ns = project.namespace;
    const op = await project.start([`--namespace=${ns}`]);
    const n = scaled(300);
    const specs = fc.sample(
      fc.oneof({ arbitrary: schemaInvalid, weight: 3 }, { arbitrary: childInvalid, weight: 1 }),
      {
        numRuns: n,
        seed: SEED,
      },
    );
    const rssStart = await rssMiB(op.pid);
    const refused: string[] = [];
    const admitted: string[] = [];
    const wrong: string[] = [];
    let rssMid = NaN;
    await pool(
      specs.map((spec, i) => ({ spec, name: `bad-${i}` })),
      8,
      async ({ spec, name }) => {
        try {
          await persist(`create ${name}`, () =>
            env.client.create({
              apiVersion: AppService.apiVersion,
              kind: "AppService",
              metadata: { name, namespace: ns },
              spec,
            } as never),
          );
          admitted.push(name);
        } catch (err) {
          if (err instanceof InvalidError) refused.push(name);
          else wrong.push(`${name}: ${(err as Error).message} ${JSON.stringify(spec)}`);
        }
        if (refused.length + admitted.length === Math.floor(n / 2)) rssMid = await rssMiB(op.pid);
      },
    );
    assert.deepEqual(wrong, [], "each create was refused as Invalid (422) or admitted");

    // Each admitted one: Ready=False naming why, and a Warning Event about it.
    const deadline = Date.now() + 120_000;
    let unreported: string[] = admitted;
    while (unreported.length && Date.now() < deadline) {
      await sleep(2_000);
      const [apps, events] = await Promise.all([
        env.client.listAll(AppService, { namespace: ns }),
        env.client.listAll(EventsV1, { namespace: ns }),
      ]);
      const warned = new Set(events.items.filter((e) => e.type === "Warning").map((e) => e.regarding?.name));
      const notReady = new Set(
        apps.items
          .filter((a) =>
            a.status?.conditions?.some((c) => c.type === "Ready" && c.status === "False" && c.message),
          )
          .map((a) => a.metadata.name),
      );
      unreported = admitted.filter((a) => !warned.has(a) || !notReady.has(a));
    }
    // Keep retrying them for a while: memory must not grow with the retries.
    await sleep(5_000);
    const rssEnd = await rssMiB(op.pid);
    const exited = await Promise.race([op.exited.then(() => true), sleep(0).then(() => false)]);
    report("bad-input", {
      load: `${n} generated invalid AppServices (seed ${SEED}): ${refused.length} refused by the API server, ${admitted.length} admitted`,
      faults: "invalid specs (schema and children)",
      lost: unreported.length,
      startedAt,
      extra: `operator RSS ${rssStart.toFixed(0)} → ${rssMid.toFixed(0)} → ${rssEnd.toFixed(0)} MiB`,
    });
    assert.equal(exited, false, `the operator exited:\n${op.tail()}`);
    assert.deepEqual(unreported, [], "every admitted invalid AppService has Ready=False and a Warning Event");
    assert.ok(admitted.length > 0 && refused.length > 0, "both kinds of bad input were generated");
    assert.ok(rssEnd - rssStart < 96, `RSS grew ${(rssEnd - rssStart).toFixed(0)} MiB (bound 96 MiB)`);
    await op.stop();
  });
});
