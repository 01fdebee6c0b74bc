/**
 * The score plugins and one whole decision: least allocated and balanced allocation pull the same pod
 * to different nodes, so the profile's weights decide; image locality and owner spread; the
 * "0/N nodes are available" message. (The assumption of pods bound but not yet seen: nodecache.test.ts.)
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { defaultProfile, parseConfig } from "../src/config.ts";
import { schedule, unschedulableMessage } from "../src/framework.ts";
import {
  balancedAllocation,
  imageLocality,
  leastAllocated,
  normalizeImage,
  ownerSpread,
} from "../src/plugins/scores.ts";
import { info, node, pod } from "./helpers.ts";

// A: lots of memory, B: cpu and memory in proportion. A 2-cpu, 2Gi pod leaves A emptier (least
// allocated) but B more even (balanced allocation).
const A = () => info(node("a", { cpu: "4", memory: "64Gi" }));
const B = () => info(node("b", { cpu: "4", memory: "4Gi" }));
const twoByTwo = () => pod({ cpu: "2", memory: "2Gi" });

describe("score plugins", () => {
  it("least allocated prefers the emptier node, balanced allocation the evener one", () => {
    assert.deepEqual(leastAllocated.score(twoByTwo(), [A(), B()]), [73, 50]);
    assert.deepEqual(balancedAllocation.score(twoByTwo(), [A(), B()]), [77, 100]);
  });

  it("pods without requests count with kube-scheduler's defaults (100m, 200Mi)", () => {
    const busy = info(node("busy", { cpu: "1", memory: "2000Mi" }), [pod(), pod(), pod(), pod()]);
    const idle = info(node("idle", { cpu: "1", memory: "2000Mi" }));
    const [b, i] = leastAllocated.score(pod(), [busy, idle]);
    assert.ok((b ?? 0) < (i ?? 0), `${b} < ${i}`);
  });

  it("image locality prefers the node holding the pod's image, matching short and full names", () => {
    assert.equal(normalizeImage("nginx"), "docker.io/library/nginx:latest");
    assert.equal(normalizeImage("acme/app:1"), "docker.io/acme/app:1");
    assert.equal(normalizeImage("registry.acme.com/skynet/t1000:v1"), "registry.acme.com/skynet/t1000:v1");
    const big = 500 * 2 ** 20;
    const holder = info(node("h", { images: [{ names: ["docker.io/library/nginx:1.27"], sizeBytes: big }] }));
    const [h, e] = imageLocality.score(pod({ image: "nginx:1.27" }), [holder, info(node("e"))]);
    assert.equal(e, 0);
    assert.ok((h ?? 0) > 40 && (h ?? 0) < 60, String(h));
  });

  it("owner spread scores a node by how few of the owner's pods it has", () => {
    const crowded = info(node("c"), [pod({ owner: "rs1" }), pod({ owner: "rs1" }), pod({ owner: "rs2" })]);
    const some = info(node("s"), [pod({ owner: "rs1" })]);
    const none = info(node("n"), [pod({ owner: "rs2" })]);
    assert.deepEqual(ownerSpread.score(pod({ owner: "rs1" }), [crowded, some, none]), [0, 50, 100]);
    assert.deepEqual(ownerSpread.score(pod(), [crowded, none]), [100, 100], "no owner: no preference");
  });

  it("every plugin scores within 0..100 (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ cpu: fc.integer({ min: 1, max: 64 }), gi: fc.integer({ min: 1, max: 256 }) }), {
          minLength: 1,
          maxLength: 5,
        }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 0, max: 1024 }),
        (sizes, milli, mi) => {
          const nodes = sizes.map((s, i) => info(node(`n${i}`, { cpu: String(s.cpu), memory: `${s.gi}Gi` })));
          const p = pod({ cpu: `${milli}m`, memory: `${mi}Mi`, owner: "rs" });
          for (const plugin of [leastAllocated, balancedAllocation, imageLocality, ownerSpread]) {
            for (const s of plugin.score(p, nodes)) assert.ok(s >= 0 && s <= 100, `${plugin.name}: ${s}`);
          }
        },
      ),
    );
  });
});

describe("schedule", () => {
  const weighted = (least: number, balanced: number) =>
    parseConfig(
      `profiles:
  - plugins:
      score:
        enabled: [{ name: LeastAllocated, weight: ${least} }, { name: BalancedAllocation, weight: ${balanced} }]`,
      "test",
    )[0]!;

  it("the weights decide between candidates", () => {
    const least = schedule(twoByTwo(), [A(), B()], weighted(5, 1));
    assert.equal(least.kind === "scheduled" && least.node, "a");
    const balanced = schedule(twoByTwo(), [A(), B()], weighted(1, 5));
    assert.equal(balanced.kind === "scheduled" && balanced.node, "b");
  });

  it("a tie goes to the first node by name", () => {
    const d = schedule(pod(), [info(node("z")), info(node("m"))], defaultProfile());
    assert.equal(d.kind === "scheduled" && d.node, "m");
  });

  it("no fitting node: the message counts each node's first failing reason", () => {
    const nodes = [
      info(node("t", { taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] })),
      info(node("s1", { cpu: "1" })),
      info(node("s2", { cpu: "1", memory: "1Gi" })),
    ];
    const d = schedule(pod({ cpu: "2", memory: "2Gi" }), nodes, defaultProfile());
    assert.equal(d.kind, "unschedulable");
    assert.equal(
      d.kind === "unschedulable" && d.message,
      "0/3 nodes are available: 2 Insufficient cpu, 1 Insufficient memory, 1 node(s) had untolerated taint {dedicated: gpu}.",
    );
    assert.equal(unschedulableMessage(0, {}), "no nodes available to schedule pods");
  });

  it("a chosen node always passes every filter (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            cpu: fc.integer({ min: 1, max: 8 }),
            tainted: fc.boolean(),
            ready: fc.boolean(),
            zone: fc.constantFrom("a", "b"),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        fc.integer({ min: 1, max: 8000 }),
        (specs, milli) => {
          const nodes = specs.map((s, i) =>
            info(
              node(`n${i}`, {
                cpu: String(s.cpu),
                ready: s.ready,
                labels: { zone: s.zone },
                taints: s.tainted ? [{ key: "t", effect: "NoSchedule" }] : undefined,
              }),
            ),
          );
          const d = schedule(pod({ cpu: `${milli}m`, nodeSelector: { zone: "a" } }), nodes, defaultProfile());
          const fits = specs.map((s) => s.ready && !s.tainted && s.zone === "a" && milli <= s.cpu * 1000);
          if (d.kind === "scheduled") assert.ok(fits[Number(d.node.slice(1))], d.node);
          else assert.ok(!fits.some(Boolean));
        },
      ),
    );
  });
});
