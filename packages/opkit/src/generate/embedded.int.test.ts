/**
 * Kinds that embed built-in object templates, as kubebuilder's CronJob embeds a JobTemplateSpec: the CRD
 * stays under the 256 KiB client-side `kubectl apply` can annotate (embedded ObjectMeta restricted as
 * controller-gen's generateEmbeddedObjectMeta, built-in descriptions left out), `kubectl apply -k`
 * accepts it, and an object with a full Job template round-trips without anything pruned. Also: a seed
 * operator's kind explains its spec and status.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import * as Type from "typebox/type";
import { defineKind, type ObjectOf } from "../api/kind.ts";
import * as batchv1 from "../api/schemas/batch/v1.ts";
import { CustomResourceDefinitions } from "../client/builtins.ts";
import { eventually } from "../testenv/eventually.ts";
import { readManifests } from "../testenv/serviceaccount.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { binDir } from "../testenv/versions.ts";
import { CLIENT_SIDE_APPLY_LIMIT, appliedSize, crdFor } from "./crd.ts";
import { writeKustomize } from "./manifests.ts";

const run = promisify(execFile);
const group = `cj${Date.now().toString(36)}.test.opkit.dev`;

const CronJob = defineKind({
  group,
  version: "v1",
  kind: "CronJob",
  description: "Runs a Job on a schedule (kubebuilder's tutorial kind).",
  spec: Type.Object({
    schedule: Type.String({ description: "The schedule in Cron format." }),
    jobTemplate: batchv1.JobTemplateSpec,
  }),
  status: Type.Object({ lastScheduleTime: Type.Optional(Type.String({ format: "date-time" })) }),
});
type CronJobObject = ObjectOf<typeof CronJob>;

const crd = crdFor(CronJob);

/** A Job template with every kind of field a user sets, metadata included. */
const jobTemplate = {
  metadata: {
    name: "nightly",
    labels: { app: "report", tier: "batch" },
    annotations: { "example.com/owner": "team-a" },
    finalizers: ["example.com/keep"],
  },
  spec: {
    backoffLimit: 2,
    activeDeadlineSeconds: 600,
    template: {
      metadata: { labels: { app: "report" }, annotations: { "example.com/pod": "yes" } },
      spec: {
        restartPolicy: "Never",
        serviceAccountName: "reporter",
        containers: [
          {
            name: "report",
            image: "busybox:1.36",
            args: ["sh", "-c", "date; echo report"],
            env: [{ name: "MODE", value: "nightly" }],
            resources: { limits: { cpu: "500m", memory: "128Mi" }, requests: { cpu: "100m" } },
            volumeMounts: [{ name: "scratch", mountPath: "/scratch" }],
          },
        ],
        volumes: [{ name: "scratch", emptyDir: {} }],
        nodeSelector: { "kubernetes.io/os": "linux" },
      },
    },
  },
};

describe("kinds embedding built-in templates", () => {
  let env: TestEnv;
  let dir: string;
  let ns: string;
  const kubectl = (...args: string[]) =>
    run(join(binDir(), "kubectl"), ["--kubeconfig", env.kubeconfigPath, ...args], { encoding: "utf8" });
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("cronjobs");
    dir = await mkdtemp(join(tmpdir(), "opkit-embedded-"));
  });
  after(async () => {
    await env?.client.delete(CustomResourceDefinitions, crd.metadata.name ?? "").catch(() => undefined);
    await env?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("generates a CRD under 256 KiB; with the built-in descriptions it would not be", () => {
    assert.ok(appliedSize(crd) < CLIENT_SIDE_APPLY_LIMIT, `${appliedSize(crd)} bytes`);
    assert.ok(appliedSize(crdFor(CronJob, { builtinDescriptions: true })) > CLIENT_SIDE_APPLY_LIMIT);
  });

  it("client-side kubectl apply -k accepts it and serves it", async () => {
    await writeKustomize(dir, [crd]);
    const { stdout } = await kubectl("apply", "-k", dir);
    assert.match(
      stdout,
      new RegExp(`customresourcedefinition.apiextensions.k8s.io/cronjobs.${group} created`),
    );
    // What client-side apply left on the object: the whole CRD in its last-applied annotation.
    const live = await env.client.get(CustomResourceDefinitions, crd.metadata.name ?? "");
    assert.ok(live.metadata.annotations?.["kubectl.kubernetes.io/last-applied-configuration"]);
    await eventually("the kind is served", async () => {
      const r = await kubectl("get", `cronjobs.${group}`, "-n", ns).catch(() => undefined);
      return r !== undefined;
    });
  });

  it("an object with a full Job template round-trips unpruned, pod template labels included", async () => {
    const Kind = { apiVersion: CronJob.apiVersion, kind: CronJob.kind };
    const created = await env.client.create({
      ...Kind,
      metadata: { name: "nightly", namespace: ns },
      spec: { schedule: "0 3 * * *", jobTemplate },
    } as CronJobObject);
    const stored = await env.client.get(CronJob, created.metadata.name ?? "", { namespace: ns });
    assert.deepEqual(stored.spec.jobTemplate, jobTemplate);
    // Fields an embedded ObjectMeta does not keep (controller-gen's generateEmbeddedObjectMeta) are pruned.
    const withExtra = structuredClone(jobTemplate) as Record<string, unknown> & typeof jobTemplate;
    (withExtra.metadata as Record<string, unknown>).ownerReferences = [
      { apiVersion: "v1", kind: "ConfigMap", name: "x", uid: "00000000-0000-0000-0000-000000000000" },
    ];
    const second = await env.client.create({
      ...Kind,
      metadata: { name: "pruned", namespace: ns },
      spec: { schedule: "0 4 * * *", jobTemplate: withExtra },
    } as CronJobObject);
    assert.deepEqual(second.spec.jobTemplate, jobTemplate);
  });

  it("kubectl explain of a seed operator's kind shows descriptions for spec and status", async () => {
    const file = fileURLToPath(
      new URL(
        "../../../../operators/memcached/config/crds/memcacheds.cache.example.com.yaml",
        import.meta.url,
      ),
    );
    await env.installCrds(await readManifests(file));
    for (const field of ["spec", "status"]) {
      const out = await eventually(
        `kubectl explain memcacheds.${field}`,
        async () => {
          const r = await kubectl(
            "explain",
            `memcacheds.${field}`,
            "--api-version=cache.example.com/v1alpha1",
          );
          return /DESCRIPTION:\s*\n\s*\S/.test(r.stdout) && !/<empty>/.test(r.stdout) ? r.stdout : undefined;
        },
        30_000,
        500,
      );
      assert.match(out, field === "spec" ? /desired state/ : /observed state/);
    }
  });
});
