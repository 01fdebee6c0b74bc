import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { KubeClient } from "./client.ts";
import { CrdNotReadyError, installCrds } from "./crds.ts";
import { kindRef, type KubeObject } from "./types.ts";

function crd(group: string, plural: string, kind: string): KubeObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: { plural, singular: plural.slice(0, -1), kind, listKind: `${kind}List` },
      versions: ["v1", "v2"].map((name, i) => ({
        name,
        served: true,
        storage: i === 0,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      })),
    },
  } as KubeObject;
}

describe("installCrds", () => {
  let env: TestEnv;
  let client: KubeClient;
  const group = `crds-${randomBytes(3).toString("hex")}.opkit.dev`;
  before(async () => {
    env = await useTestEnv();
    client = await KubeClient.load({ kubeconfig: env.kubeconfigPath, fieldManager: "crds-test" });
  });
  after(async () => {
    for (const name of [`widgets.${group}`, `gadgets.${group}`])
      await env.client
        .delete(kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition"), name)
        .catch(() => {});
    await client?.close();
    await env?.cleanup();
  });

  it("returns only once every served version answers: the first list and create right after succeed", async () => {
    const ns = await env.namespace("crds");
    await installCrds(client, [crd(group, "widgets", "Widget")]);
    // A fresh client (no discovery cached) straight away, in both versions.
    const fresh = await KubeClient.load({ kubeconfig: env.kubeconfigPath });
    try {
      for (const v of ["v1", "v2"])
        assert.deepEqual((await fresh.list(kindRef(`${group}/${v}`, "Widget"), { namespace: ns })).items, []);
      await fresh.create({
        apiVersion: `${group}/v1`,
        kind: "Widget",
        metadata: { name: "w", namespace: ns },
      });
    } finally {
      await fresh.close();
    }
  });

  it("a CRD whose names are refused fails in time, naming it and the condition", async () => {
    // Same kind in the same group under another plural: the API server refuses its names.
    await assert.rejects(
      installCrds(client, [crd(group, "gadgets", "Widget")], { timeoutMs: 3_000 }),
      (err: unknown) => {
        assert.ok(err instanceof CrdNotReadyError);
        assert.equal(err.crd, `gadgets.${group}`);
        assert.match(err.message, /NamesAccepted=False/);
        return true;
      },
    );
  });
});
