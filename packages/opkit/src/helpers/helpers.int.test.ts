/**
 * The reconcile helpers against the real control plane: finalizers hold an object until cleanup
 * succeeds, owner references let the garbage collector remove children, repeated Events collapse into
 * one series, status is written only when it changed, and ManageError/ManageSuccess leave conditions
 * and Warning Events on a custom resource.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeClient } from "../client/client.ts";
import { ConflictError, NotFoundError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { FakeClock } from "../clock/index.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { applyOwned, createOrUpdate } from "./apply.ts";
import { getCondition, type Condition } from "./conditions.ts";
import { RetryTracker, manageError, manageSuccess } from "./errors.ts";
import { EventRecorder, EventsV1, type EventV1 } from "../events/recorder.ts";
import { ensureFinalizer, handleFinalizer, hasFinalizer } from "./finalizers.ts";
import { OwnerReferenceError, getControllerOf, setControllerReferenceAsync } from "./ownerrefs.ts";
import { updateStatusIfChanged } from "./status.ts";
import { eventually } from "../testenv/eventually.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");

interface WidgetStatus {
  phase?: string;
  extra?: number;
  conditions?: Condition[];
}
type Widget = KubeObject & { spec?: { size?: number }; status?: WidgetStatus };
const Widgets = kindRef<Widget>("test.opkit.dev/v1", "Widget");

const WIDGET_CRD: KubeObject = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.test.opkit.dev" },
  spec: {
    group: "test.opkit.dev",
    scope: "Namespaced",
    names: { plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList" },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            },
          },
        },
      },
    ],
  },
} as KubeObject;

async function gone(get: () => Promise<unknown>): Promise<boolean> {
  try {
    await get();
    return false;
  } catch (err) {
    if (err instanceof NotFoundError) return true;
    throw err;
  }
}

class ValidationError extends Error {}

describe("helpers against opkit env", () => {
  let env: TestEnv;
  let ns: string;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("helpers");
    await env.installCrds([WIDGET_CRD]);
  });
  after(async () => {
    await env?.cleanup();
  });

  it("finalizer: added, cleanup on delete, a failing cleanup keeps it, the object goes after success", async () => {
    const FIN = "test.opkit.dev/cleanup";
    const created = await env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "fin", namespace: ns },
    });
    let cleanups = 0;
    const cleanup = async (): Promise<void> => {
      cleanups++;
    };
    assert.equal(await handleFinalizer(env.client, created, FIN, cleanup), "added");
    let live = await env.client.get(ConfigMaps, "fin", { namespace: ns });
    assert.deepEqual(live.metadata.finalizers, [FIN]);
    assert.equal(await handleFinalizer(env.client, live, FIN, cleanup), "noop");
    assert.equal(cleanups, 0);

    // Optimistic concurrency: a write from a stale read is refused instead of clobbering the list.
    const stale = structuredClone(live);
    await env.client.patch(
      ConfigMaps,
      "fin",
      { metadata: { labels: { touched: "yes" } } },
      {
        type: "merge",
        namespace: ns,
      },
    );
    await assert.rejects(ensureFinalizer(env.client, stale, "test.opkit.dev/other"), ConflictError);

    await env.client.delete(ConfigMaps, "fin", { namespace: ns });
    live = await env.client.get(ConfigMaps, "fin", { namespace: ns });
    assert.ok(live.metadata.deletionTimestamp, "held by the finalizer");

    await assert.rejects(
      handleFinalizer(env.client, live, FIN, async () => {
        throw new Error("external system unavailable");
      }),
      /external system unavailable/,
    );
    live = await env.client.get(ConfigMaps, "fin", { namespace: ns });
    assert.ok(hasFinalizer(live, FIN), "finalizer kept after a failed cleanup");

    assert.equal(await handleFinalizer(env.client, live, FIN, cleanup), "finalized");
    assert.equal(cleanups, 1);
    await eventually("object deleted", () =>
      gone(() => env.client.get(ConfigMaps, "fin", { namespace: ns })),
    );
  });

  it("owner reference: applyOwned sets the controller, the garbage collector removes the child with the parent", async () => {
    const parent = await env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "parent", namespace: ns },
    });
    const child = await applyOwned(
      env.client,
      parent,
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "child", namespace: ns },
        data: { a: "1" },
      },
      { fieldManager: "helpers-test" },
    );
    assert.equal(getControllerOf(child)?.uid, parent.metadata.uid);
    assert.equal(child.data?.a, "1");

    // The scope rules are resolved through discovery: a namespaced owner cannot own a Namespace.
    await assert.rejects(
      setControllerReferenceAsync(env.client, parent, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "x" },
      }),
      OwnerReferenceError,
    );

    await env.client.delete(ConfigMaps, "parent", { namespace: ns });
    await eventually("child garbage-collected", () =>
      gone(() => env.client.get(ConfigMaps, "child", { namespace: ns })),
    );
  });

  it("createOrUpdate creates, then updates only when the mutation changes the live object", async () => {
    const base: ConfigMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cou", namespace: ns } };
    const setA = (cm: ConfigMap): void => {
      cm.data = { ...cm.data, a: "1" };
    };
    assert.equal((await createOrUpdate(env.client, base, setA)).result, "created");
    const again = await createOrUpdate(env.client, base, setA);
    assert.equal(again.result, "unchanged");
    const changed = await createOrUpdate(env.client, base, (cm) => {
      cm.data = { ...cm.data, b: "2" };
    });
    assert.equal(changed.result, "updated");
    assert.deepEqual(changed.object.data, { a: "1", b: "2" });
  });

  it("events: recording the same event 5 times yields one Event with a series", async (t) => {
    const errors: unknown[] = [];
    const recorder = new EventRecorder(env.client, {
      reportingController: "opkit.dev/helpers-test",
      onError: (err) => errors.push(err),
    });
    t.after(() => recorder.flush());
    const subject = await env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "evented", namespace: ns },
    });
    for (let i = 0; i < 5; i++) {
      await recorder.record(subject, {
        type: "Normal",
        reason: "Synced",
        action: "Reconcile",
        note: "all good",
      });
    }
    await recorder.flush();
    assert.deepEqual(errors, []);
    const events = (await env.client.list(EventsV1, { namespace: ns })).items.filter(
      (e: EventV1) => e.regarding.uid === subject.metadata.uid,
    );
    assert.equal(events.length, 1, `one Event, got ${events.length}`);
    const ev = events[0];
    assert.ok(ev);
    assert.ok((ev.series?.count ?? 0) >= 2, `series.count ${ev.series?.count}`);
    assert.equal(ev.series?.count, 5);
    assert.equal(ev.reason, "Synced");
    assert.equal(ev.reportingController, "opkit.dev/helpers-test");
  });

  it("updateStatusIfChanged writes once, then not again for the same status", async (t) => {
    let writes = 0;
    const counting = await KubeClient.load({
      kubeconfig: env.kubeconfigPath,
      onRequest: (e) => {
        if (e.method === "PATCH" && e.path.endsWith("/status")) writes++;
      },
    });
    t.after(() => counting.close());
    const w = await env.client.create<Widget>({
      apiVersion: "test.opkit.dev/v1",
      kind: "Widget",
      metadata: { name: "status", namespace: ns },
      spec: { size: 1 },
    });
    assert.equal(await updateStatusIfChanged(counting, w, { phase: "A", extra: 1 }), true);
    let live = await counting.get(Widgets, "status", { namespace: ns });
    assert.deepEqual(live.status, { phase: "A", extra: 1 });
    assert.equal(await updateStatusIfChanged(counting, live, { phase: "A", extra: 1 }), false);
    assert.equal(
      await updateStatusIfChanged(counting, live, { extra: 1, phase: "A" }),
      false,
      "key order does not matter",
    );
    assert.equal(writes, 1);

    // A removed key is removed on the server too (the merge patch carries null for it).
    assert.equal(await updateStatusIfChanged(counting, live, { phase: "B" }), true);
    live = await counting.get(Widgets, "status", { namespace: ns });
    assert.deepEqual(live.status, { phase: "B" });
    assert.equal(live.metadata.generation, 1, "status writes do not bump the generation");
    assert.equal(writes, 2);
  });

  it("updateStatusIfChanged on a stale copy (a cache behind our own write) does not write the same again", async (t) => {
    let writes = 0;
    const counting = await KubeClient.load({
      kubeconfig: env.kubeconfigPath,
      onRequest: (e) => {
        if (e.method === "PATCH" && e.path.endsWith("/status")) writes++;
      },
    });
    t.after(() => counting.close());
    const stale = await env.client.create<Widget>({
      apiVersion: "test.opkit.dev/v1",
      kind: "Widget",
      metadata: { name: "stale-status", namespace: ns },
      spec: { size: 1 },
    });
    assert.equal(await updateStatusIfChanged(counting, stale, { phase: "A" }), true);
    // The next reconcile still reads the copy from before the write: the server already has it.
    assert.equal(await updateStatusIfChanged(counting, stale, { phase: "A" }), false);
    assert.equal(writes, 1);
    // A different status from the same stale copy is written, as a diff against what the server holds.
    assert.equal(await updateStatusIfChanged(counting, stale, { phase: "B", extra: 2 }), true);
    assert.equal(writes, 2);
    let live = await counting.get(Widgets, "stale-status", { namespace: ns });
    assert.deepEqual(live.status, { phase: "B", extra: 2 });
    // Someone else changes the status: a fresh copy is compared as it is, and the status restored.
    await env.client.patch(
      Widgets,
      "stale-status",
      { status: { phase: "X" } },
      { type: "merge", namespace: ns, subresource: "status" },
    );
    live = await counting.get(Widgets, "stale-status", { namespace: ns });
    assert.equal(await updateStatusIfChanged(counting, live, { phase: "B", extra: 2 }), true);
    assert.equal(writes, 3);
    live = await counting.get(Widgets, "stale-status", { namespace: ns });
    assert.deepEqual(live.status, { phase: "B", extra: 2 });
  });

  it("manageError / manageSuccess: condition, Warning Event and growing delays on a custom resource", async (t) => {
    const recorder = new EventRecorder(env.client, { reportingController: "opkit.dev/helpers-test" });
    t.after(() => recorder.flush());
    const ctx = { client: env.client, recorder, retries: new RetryTracker({ clock: new FakeClock() }) };
    let w = await env.client.create<Widget>({
      apiVersion: "test.opkit.dev/v1",
      kind: "Widget",
      metadata: { name: "failing", namespace: ns },
      spec: { size: -1 },
    });

    assert.equal(await manageError(ctx, w, new ValidationError("spec.size must be positive")), 1000);
    w = await env.client.get(Widgets, "failing", { namespace: ns });
    const ready = getCondition(w.status?.conditions, "Ready");
    assert.equal(ready?.status, "False");
    assert.equal(ready?.reason, "ValidationError");
    assert.equal(ready?.message, "spec.size must be positive");
    assert.equal(ready?.observedGeneration, 1);

    const rv = w.metadata.resourceVersion;
    assert.equal(await manageError(ctx, w, new ValidationError("spec.size must be positive")), 2000);
    assert.equal(await manageError(ctx, w, new ValidationError("spec.size must be positive")), 4000);
    w = await env.client.get(Widgets, "failing", { namespace: ns });
    assert.equal(w.metadata.resourceVersion, rv, "an unchanged condition is not written again");

    await recorder.flush();
    const warnings = (await env.client.list(EventsV1, { namespace: ns })).items.filter(
      (e) => e.regarding.uid === w.metadata.uid && e.type === "Warning",
    );
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.reason, "ValidationError");
    assert.equal(warnings[0]?.note, "spec.size must be positive");
    assert.equal(warnings[0]?.series?.count, 3);

    await manageSuccess(ctx, w);
    w = await env.client.get(Widgets, "failing", { namespace: ns });
    const ok = getCondition(w.status?.conditions, "Ready");
    assert.equal(ok?.status, "True");
    assert.notEqual(ok?.lastTransitionTime, undefined);
    assert.equal(ctx.retries.attempts(w.metadata.uid ?? ""), 0);
    assert.equal(await manageError(ctx, w, new Error("again")), 1000, "a success resets the delay");

    // The object is deleted while its reconcile fails: the status write's NotFound is not an error.
    await env.client.delete(Widgets, "failing", { namespace: ns });
    await eventually("widget deleted", () =>
      gone(() => env.client.get(Widgets, "failing", { namespace: ns })),
    );
    assert.equal(await manageError(ctx, w, new Error("transient")), 2000);
  });
});
