/**
 * `opkit migrate` on a project's kind after its storage version moved: 1,000 objects stored in v1, the
 * project's CRD (v1 and v2, v2 the storage version) installed with `opkit install`, then `opkit migrate`:
 * every object ends stored in v2 (read from etcd), none is lost, storedVersions holds v2 alone, and the
 * command reports its rate and duration. Runs the CLI as a user does, against opkit env.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as Type from "typebox/type";
import { defineKind, kindRef, type KubeObject } from "opkit";
import { crdFor } from "opkit/generate";
import { useTestEnv, type TestEnv } from "opkit/testenv";
import { createApi, initProject } from "./commands/project.ts";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const COUNT = 1000;
const GROUP = "migrate.example.com";
const Crds = kindRef<KubeObject & { status?: { storedVersions?: string[] } }>(
  "apiextensions.k8s.io/v1",
  "CustomResourceDefinition",
);
/** The project's kind as its first release defined it: v1 only (the scaffold's spec). */
const CartV1 = defineKind({
  group: GROUP,
  version: "v1",
  kind: "Cart",
  spec: Type.Object({ size: Type.Integer({ minimum: 1, maximum: 100, default: 1 }) }),
});

function opkit(args: string[], env: Record<string, string> = {}): { code: number; out: string } {
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, ...args], {
    encoding: "utf8",
    timeout: 300_000,
    env: { ...process.env, ...env },
  });
  return { code: r.status ?? -1, out: r.stdout + r.stderr };
}

describe("opkit migrate", () => {
  let env: TestEnv;
  let work: string;
  before(async () => {
    env = await useTestEnv();
    const checkout = fileURLToPath(new URL("../../..", import.meta.url));
    mkdirSync(join(checkout, ".opkit"), { recursive: true });
    work = await mkdtemp(join(checkout, ".opkit", "migrate-"));
  });
  after(async () => {
    await env?.client.delete(Crds, `carts.${GROUP}`).catch(() => undefined);
    await env?.cleanup();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it(`moves ${COUNT} stored objects to the new storage version and reports rate and duration`, async () => {
    const root = await initProject(join(work, "shop"), {
      domain: "example.com",
      link: true,
      install: false,
      onNote: () => {},
    });
    await createApi(root, { group: "migrate", version: "v1", kind: "Cart", onNote: () => {} });
    await createApi(root, { group: "migrate", version: "v2", kind: "Cart", onNote: () => {} });
    const v2 = join(root, "src", "api", "v2", "cart.ts");
    writeFileSync(v2, readFileSync(v2, "utf8").replace('version: "v2",', 'version: "v2",\n  storage: true,'));

    // Release 1: the CRD stores v1, and the objects are written.
    await env.installCrds([crdFor(CartV1)]);
    const ns = await env.namespace("migrate-cli");
    for (let i = 0; i < COUNT; i += 100)
      await Promise.all(
        Array.from({ length: 100 }, (_, j) =>
          env.client.create(CartV1.new(`c-${i + j}`, { size: 1 + ((i + j) % 100) }, { namespace: ns })),
        ),
      );
    // Release 2: the project's CRD, v2 the storage version.
    const install = opkit(["install", "--dir", root, "--kubeconfig", env.kubeconfigPath]);
    assert.equal(install.code, 0, install.out);
    assert.deepEqual((await env.client.get(Crds, `carts.${GROUP}`)).status?.storedVersions, ["v1", "v2"]);

    const migrated = opkit([
      "migrate",
      "--dir",
      root,
      "--kind",
      "Cart",
      "--qps",
      "500",
      "--no-in-tree",
      "--kubeconfig",
      env.kubeconfigPath,
    ]);
    assert.equal(migrated.code, 0, migrated.out);
    const report =
      /carts\.migrate\.example\.com: every object stored in v2 \((\d+) rewritten in ([\d.]+) s, (\d+)\/s\); storedVersions v1,v2 → v2/.exec(
        migrated.out,
      );
    assert.ok(report, migrated.out);
    assert.equal(Number(report[1]), COUNT);
    process.stderr.write(`opkit migrate: ${report[1]} objects in ${report[2]} s (${report[3]}/s)\n`);

    const stored = await env.controlPlane.stored(`/registry/${GROUP}/carts/${ns}/`);
    assert.equal(stored.length, COUNT, "no object lost");
    assert.deepEqual([...new Set(stored.map((e) => (e.value as KubeObject).apiVersion))], [`${GROUP}/v2`]);
    assert.deepEqual((await env.client.get(Crds, `carts.${GROUP}`)).status?.storedVersions, ["v2"]);

    const again = opkit(["migrate", "--dir", root, "--kubeconfig", env.kubeconfigPath]);
    assert.equal(again.code, 0, again.out);
    assert.match(again.out, /already stored in v2 alone; nothing to do/);
    const unknown = opkit(["migrate", "--dir", root, "--kind", "Basket", "--kubeconfig", env.kubeconfigPath]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.out, /--kind Basket: the project defines no such kind \(it defines Cart\)/);
  });
});
