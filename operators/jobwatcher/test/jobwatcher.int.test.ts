/**
 * The JobWatcher operator against a real control plane (opkit env), run as its own process under its
 * generated RBAC only (impersonating its ServiceAccount), with its generated CRDs:
 * - succeeded and failed Jobs go after their own TTLs, within two seconds of expiry, with their pods;
 *   Jobs whose names do not match and running Jobs stay;
 * - invalid patterns are refused by the API server, and the server's CEL rules and the controller's
 *   validation agree on every pattern of a tricky corpus;
 * - two overlapping watchers follow the merge rule (the longest TTL wins, the decider is credited);
 * - after the operator is killed and started again, pending expiries are still honoured and the ones
 *   that passed while it was down are caught up at once.
 * kwok completes Job pods (`opkit.dev/simulate-exit-code` makes one fail, `simulate-duration` keeps one
 * running). Watchers only ever name this file's namespaces: other tests share the control plane.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  EventsV1,
  ForbiddenError,
  InvalidError,
  Jobs,
  LocalWebhooks,
  Pods,
  type Job,
  type KubeObject,
} from "opkit";
import {
  SIMULATE_DURATION_ANNOTATION,
  SIMULATE_EXIT_CODE_ANNOTATION,
  eventually,
  readManifests,
  type OperatorProcess,
  type OperatorProject,
  type TestEnv,
} from "opkit/testenv";
import { operatorTest } from "../../demo/operator-test.ts";
import { ClusterJobWatcher, JobWatcher } from "../src/api/v1/jobwatcher.ts";
import { finished } from "../src/policy.ts";
import { validateJobWatcherSpec } from "../src/validation.ts";
import operator from "../src/operator.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

function newJob(name: string, namespace: string, opts: { exitCode?: number; duration?: string } = {}): Job {
  const annotations: Record<string, string> = {};
  if (opts.exitCode !== undefined) annotations[SIMULATE_EXIT_CODE_ANNOTATION] = String(opts.exitCode);
  if (opts.duration) annotations[SIMULATE_DURATION_ANNOTATION] = opts.duration;
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, namespace },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { annotations },
        spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox:1.36" }] },
      },
    },
  };
}

function getJob(env: TestEnv, ns: string, name: string): Promise<Job | undefined> {
  return env.client.getOptional(Jobs, name, { namespace: ns });
}

/** Wait for the Job to finish; returns its recorded finish time (epoch ms). */
async function finishTime(env: TestEnv, ns: string, name: string): Promise<number> {
  const job = await eventually(`Job ${name} finished`, async () => {
    const j = await getJob(env, ns, name);
    return j && finished(j) ? j : undefined;
  });
  return (finished(job) as { at: number }).at;
}

/** Poll (100 ms) until the Job is gone; returns when it was first seen gone (epoch ms). */
async function deletedAt(env: TestEnv, ns: string, name: string, timeoutMs = 60_000): Promise<number> {
  await eventually(
    `Job ${name} deleted`,
    async () => (await getJob(env, ns, name)) === undefined,
    timeoutMs,
    100,
  );
  return Date.now();
}

/** Deleted no earlier than its expiry and at most two seconds after it (plus one poll). */
function assertOnTime(what: string, finishedAt: number, ttlSeconds: number, goneAt: number): number {
  const late = goneAt - (finishedAt + ttlSeconds * 1000);
  assert.ok(late >= 0, `${what} was deleted ${-late} ms before its expiry`);
  assert.ok(late <= 2_100, `${what} was deleted ${late} ms after its expiry`);
  return late;
}

describe("JobWatcher operator", () => {
  let env: TestEnv;
  let ns: string;
  let project: OperatorProject;
  let op: OperatorProcess;
  // The operator serves its validating webhook on a local port with a certificate of its own; the
  // webhook test registers it with the API server (and removes it again).
  let hooks: LocalWebhooks;
  const start = () =>
    project.start([`--webhook-bind-address=127.0.0.1:${hooks.port}`, `--webhook-cert-dir=${hooks.certDir}`]);

  operatorTest(root, {
    setup: async (t) => {
      ({ env, project, ns } = t);
      hooks = await LocalWebhooks.prepare();
      op = await start();
    },
    afterCleanup: async () => {
      await hooks?.dispose();
    },
  });

  it("deletes succeeded and failed Jobs after their own TTLs, with their pods; keeps the rest", async (t) => {
    await env.client.create(
      JobWatcher.new(
        "ttl",
        {
          ttlSecondsAfterSucceeded: 3,
          ttlSecondsAfterFailed: 6,
          jobNamePatterns: ["ttl-.*"],
          checkIntervalSeconds: 300,
        },
        { namespace: ns },
      ),
    );
    await env.client.create(newJob("ttl-ok", ns));
    await env.client.create(newJob("ttl-fail", ns, { exitCode: 3 }));
    await env.client.create(newJob("keep-me", ns));
    await env.client.create(newJob("ttl-running", ns, { duration: "120s" }));
    const [okAt, failAt] = await Promise.all([
      finishTime(env, ns, "ttl-ok"),
      finishTime(env, ns, "ttl-fail"),
    ]);
    const failed = await getJob(env, ns, "ttl-fail");
    assert.equal(failed && finished(failed)?.outcome, "failed");
    const okPods = await env.client.list(Pods, { namespace: ns, labelSelector: "job-name=ttl-ok" });
    assert.ok(okPods.items.length > 0, "the succeeded Job has a pod until it goes");

    const [okGone, failGone] = await Promise.all([
      deletedAt(env, ns, "ttl-ok"),
      deletedAt(env, ns, "ttl-fail"),
    ]);
    const l1 = assertOnTime("ttl-ok (TTL 3 s)", okAt, 3, okGone);
    const l2 = assertOnTime("ttl-fail (TTL 6 s)", failAt, 6, failGone);
    t.diagnostic(`deleted ${l1} ms and ${l2} ms after expiry`);
    await eventually("the Jobs' pods are gone too", async () => {
      const pods = await env.client.list(Pods, {
        namespace: ns,
        labelSelector: "job-name in (ttl-ok,ttl-fail)",
      });
      return pods.items.length === 0;
    });
    assert.ok(await getJob(env, ns, "keep-me"), "a Job whose name matches no pattern stays");
    const running = await getJob(env, ns, "ttl-running");
    assert.ok(running && !finished(running), "a running Job stays");

    const w = await eventually("status counts the two deletions", async () => {
      const live = await env.client.get(JobWatcher, "ttl", { namespace: ns });
      return live.status?.jobsDeleted === 2 ? live : undefined;
    });
    assert.equal(w.status?.conditions?.find((c) => c.type === "Ready")?.status, "True");
    assert.ok(w.status?.lastRunStartTime && w.status.lastRunEndTime);
    assert.equal(w.status?.observedGeneration, w.metadata.generation);
  });

  it("refuses invalid patterns, and the API server and the controller agree on what is valid", async () => {
    await assert.rejects(
      env.client.create(
        JobWatcher.new(
          "bad",
          { jobNamePatterns: ["ok-.*", "(unclosed"], checkIntervalSeconds: 60 },
          { namespace: ns },
        ),
      ),
      (err: unknown) =>
        err instanceof InvalidError &&
        /spec\.jobNamePatterns\[1\]/.test(err.message) &&
        /missing closing \)/.test(err.message),
    );
    const corpus = [
      "batch-.*",
      "(",
      "a{1001}",
      "a{1000}",
      "\\C",
      "\\Z",
      "x**",
      "a++",
      "(?=x)",
      "\\1",
      "[a-",
      "\\p{Greek}",
      "\\p{Foo}",
      "[[:word:]]",
      "[[:foo:]]",
      "(?i)Build",
      "(?x)x",
      "\\x{110000}",
      "\\Q.*\\E",
      "(?P<n>x)",
      "(?<n>x)",
      "a)|(b",
      "\\e",
      "(?U)x*",
      "",
    ];
    const disagreements: string[] = [];
    for (const [i, p] of corpus.entries()) {
      const spec = { namespacePatterns: [p], checkIntervalSeconds: 60 };
      const ours = validateJobWatcherSpec(spec).length === 0;
      let server = true;
      try {
        await env.client.create(JobWatcher.new(`agree-${i}`, spec, { namespace: ns }), { dryRun: true });
      } catch (err) {
        if (!(err instanceof InvalidError)) throw err;
        server = false;
      }
      if (ours !== server) disagreements.push(`${JSON.stringify(p)}: server ${server}, controller ${ours}`);
    }
    assert.deepEqual(disagreements, []);
  });

  it("a stored invalid watcher (CRD without its rules) gets Ready=False and an Event, and holds its namespace back", async (t) => {
    // An object stored before the CRD had its rules: install the CRD without the pattern rules for a moment.
    const strip = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(strip);
      if (typeof node !== "object" || node === null) return node;
      return Object.fromEntries(
        Object.entries(node)
          .filter(([k]) => k !== "x-kubernetes-validations")
          .map(([k, v]) => [k, strip(v)]),
      );
    };
    const crd = (
      await readManifests(`${root}/config/crds/jobwatchers.batch.my.github.com.yaml`)
    )[0] as KubeObject;
    await env.installCrds([strip(crd) as KubeObject]);
    t.after(() => env.installCrds([crd]));
    const ns6 = await env.namespace("jobwatcher-invalid");
    await env.client.create(
      JobWatcher.new("fine", { ttlSecondsAfterSucceeded: 1, checkIntervalSeconds: 300 }, { namespace: ns6 }),
    );
    await env.client.create(
      JobWatcher.new(
        "broken",
        { ttlSecondsAfterSucceeded: 3600, jobNamePatterns: ["keep-(.*"], checkIntervalSeconds: 300 },
        { namespace: ns6 },
      ),
    );
    const broken = await eventually("Ready=False on the invalid watcher", async () => {
      const w = await env.client.get(JobWatcher, "broken", { namespace: ns6 });
      return w.status?.conditions?.find((c) => c.type === "Ready" && c.status === "False");
    }).catch((err: unknown) => {
      throw new Error(
        `${String(err)}\n${op.output
          .filter((l) => l.includes(ns6))
          .slice(-5)
          .join("\n")}`,
      );
    });
    assert.equal(broken.reason, "InvalidPattern");
    assert.match(broken.message ?? "", /spec\.jobNamePatterns\[0\] is not a valid RE2 regular expression/);
    await eventually("a Warning Event naming the field", async () => {
      const events = await env.client.list(EventsV1, { namespace: ns6 });
      return events.items.some(
        (e) => e.regarding.name === "broken" && e.type === "Warning" && e.reason === "InvalidPattern",
      );
    });
    // The rules are back: "broken" stays stored as it is (its status can no longer be written, the
    // API server refuses any write to it but a fix), and the operator still refuses to act on it.
    await env.installCrds([crd]);
    // "fine" alone would delete this Job after 1 s; the invalid watcher in the namespace holds it back.
    await env.client.create(newJob("held", ns6));
    const heldAt = await finishTime(env, ns6, "held");
    await new Promise((r) => setTimeout(r, Math.max(0, heldAt + 4_000 - Date.now())));
    assert.ok(
      await getJob(env, ns6, "held"),
      "nothing is deleted while an invalid watcher covers the namespace",
    );
    // Fixing the spec releases it: 1 s is long past, so the watcher's run deletes it at once.
    await env.client.patch(
      JobWatcher,
      "broken",
      { spec: { jobNamePatterns: ["keep-(.*)"] } },
      { type: "merge", namespace: ns6 },
    );
    await deletedAt(env, ns6, "held", 15_000);
  });

  it("merges overlapping watchers: the longest TTL wins and the deciding watcher is credited", async (t) => {
    const ns2 = await env.namespace("jobwatcher-merge");
    // Named by exact namespace: the control plane is shared with other tests' Jobs.
    await env.client.create(
      ClusterJobWatcher.new(`merge-${ns2}`, {
        ttlSecondsAfterSucceeded: 2,
        namespacePatterns: [ns2],
        checkIntervalSeconds: 300,
      }),
    );
    t.after(() => env.client.delete(ClusterJobWatcher, `merge-${ns2}`).catch(() => undefined));
    await env.client.create(
      JobWatcher.new(
        "patient",
        { ttlSecondsAfterSucceeded: 7, jobNamePatterns: ["slow-.*"], checkIntervalSeconds: 300 },
        { namespace: ns2 },
      ),
    );
    await env.client.create(newJob("slow-1", ns2));
    await env.client.create(newJob("fast-1", ns2));
    const [slowAt, fastAt] = await Promise.all([
      finishTime(env, ns2, "slow-1"),
      finishTime(env, ns2, "fast-1"),
    ]);
    const [slowGone, fastGone] = await Promise.all([
      deletedAt(env, ns2, "slow-1"),
      deletedAt(env, ns2, "fast-1"),
    ]);
    assertOnTime("fast-1 (only the ClusterJobWatcher's 2 s)", fastAt, 2, fastGone);
    assertOnTime("slow-1 (7 s beats 2 s)", slowAt, 7, slowGone);
    await eventually("each watcher is credited with the Job its TTL decided", async () => {
      const c = await env.client.get(ClusterJobWatcher, `merge-${ns2}`);
      const j = await env.client.get(JobWatcher, "patient", { namespace: ns2 });
      return c.status?.jobsDeleted === 1 && j.status?.jobsDeleted === 1;
    }).catch(async (err: unknown) => {
      const c = await env.client.get(ClusterJobWatcher, `merge-${ns2}`);
      const j = await env.client.get(JobWatcher, "patient", { namespace: ns2 });
      throw new Error(
        `${String(err)}\nClusterJobWatcher status: ${JSON.stringify(c.status)}\nJobWatcher status: ${JSON.stringify(j.status)}\n${op.tail(20)}`,
      );
    });
  });

  it("a watcher created after Jobs finished covers them too, from their own finish times", async () => {
    const ns5 = await env.namespace("jobwatcher-late");
    await env.client.create(newJob("early", ns5));
    const earlyAt = await finishTime(env, ns5, "early");
    await new Promise((r) => setTimeout(r, 1_000));
    assert.ok(await getJob(env, ns5, "early"), "no watcher yet: the Job stays");
    await env.client.create(
      JobWatcher.new("late", { ttlSecondsAfterSucceeded: 5, checkIntervalSeconds: 300 }, { namespace: ns5 }),
    );
    assertOnTime("early (covered by a later watcher)", earlyAt, 5, await deletedAt(env, ns5, "early"));
  });

  it("honours pending expiries after a restart, and catches up on those that passed while it was down", async () => {
    const ns3 = await env.namespace("jobwatcher-restart");
    await env.client.create(
      JobWatcher.new(
        "restart",
        { ttlSecondsAfterSucceeded: 6, checkIntervalSeconds: 300 },
        { namespace: ns3 },
      ),
    );
    await env.client.create(newJob("before", ns3));
    const beforeAt = await finishTime(env, ns3, "before");
    // Killed, not stopped: nothing of the old process survives except what the cluster holds.
    await op.kill();
    // "before" expires while the operator is down; "during" finishes while it is down and expires after
    // it is back.
    await new Promise((r) => setTimeout(r, Math.max(0, beforeAt + 6_500 - Date.now())));
    assert.ok(await getJob(env, ns3, "before"), "nothing deletes while the operator is down");
    await env.client.create(newJob("during", ns3));
    const duringAt = await finishTime(env, ns3, "during");
    op = await start();
    await deletedAt(env, ns3, "before", 10_000);
    const duringGone = await deletedAt(env, ns3, "during");
    assertOnTime("during (expiry after the restart)", duringAt, 6, duringGone);
  });

  it("at scale, makes no API calls beyond its watches, the deletes and status writes", async (t) => {
    const N = 150;
    const ns4 = await env.namespace("jobwatcher-scale");
    await env.client.create(
      JobWatcher.new("scale", { ttlSecondsAfterSucceeded: 3, checkIntervalSeconds: 300 }, { namespace: ns4 }),
    );
    const port = Number(/"metrics":(\d+)/.exec(await op.waitForLine(/serving metrics/))?.[1]);
    const requests = async (): Promise<Map<string, number>> => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const out = new Map<string, number>();
      for (const m of text.matchAll(/^rest_client_requests_total\{([^}]*)\} (\d+)/gm)) {
        const labels = m[1] ?? "";
        const key = `${/method="([^"]+)"/.exec(labels)?.[1]} ${/code="([^"]+)"/.exec(labels)?.[1]}`;
        out.set(key, (out.get(key) ?? 0) + Number(m[2]));
      }
      return out;
    };
    // Let the watcher's first run (a status write) pass before counting.
    await eventually("the watcher's first run", async () => {
      const w = await env.client.get(JobWatcher, "scale", { namespace: ns4 });
      return w.status?.lastRunEndTime !== undefined;
    });
    const before = await requests();
    const started = Date.now();
    for (let i = 0; i < N; i += 25)
      await Promise.all(
        Array.from({ length: Math.min(25, N - i) }, (_, k) =>
          env.client.create(newJob(`bulk-${i + k}`, ns4)),
        ),
      );
    await eventually(
      `all ${N} Jobs deleted`,
      async () => (await env.client.list(Jobs, { namespace: ns4 })).items.length === 0,
      180_000,
      500,
    );
    await eventually(
      "status counts them",
      async () => (await env.client.get(JobWatcher, "scale", { namespace: ns4 })).status?.jobsDeleted === N,
    );
    const after = await requests();
    const delta = new Map([...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)]));
    const calls = [...delta].filter(([, v]) => v > 0);
    t.diagnostic(
      `${N} Jobs created, finished and deleted in ${((Date.now() - started) / 1000).toFixed(1)} s; operator requests: ${calls.map(([k, v]) => `${k}: ${v}`).join(", ")}`,
    );
    assert.equal(delta.get("DELETE 200") ?? 0, N, "one successful delete per Job");
    let gets = 0;
    for (const [key, n] of calls) {
      const [method] = key.split(" ");
      if (method === "GET") gets += n;
      // DELETEs (404s only when a watcher's run and the Job controller raced), status PATCHes, and
      // nothing else: reads are the cache's, and no Event is recorded for routine work.
      else assert.ok(method === "DELETE" || method === "PATCH", `unexpected ${key}: ${n}`);
    }
    // A GET here can only be a watch that reopened (they last 5 to 10 minutes): never one per Job.
    assert.ok(gets <= 3, `${gets} GET requests`);
    assert.ok((delta.get("PATCH 200") ?? 0) <= N, "at most one status write per deletion");
    // A watcher's run leaves on-time deletes to the Job controller; only a starved one races it.
    assert.ok(
      (delta.get("DELETE 404") ?? 0) <= N / 5,
      `${delta.get("DELETE 404")} deletes of Jobs already gone`,
    );
  });

  it("ran with its generated RBAC and was never refused", () => {
    assert.deepEqual(
      op.output.filter((l) => /forbidden/i.test(l)),
      [],
    );
  });

  it("its validating webhook refuses an invalid pattern at admission, naming the field, when the CRD's rules are absent", async (t) => {
    const handlers = operator.webhooks ?? [];
    assert.equal(handlers.length, 2, "a validator for JobWatcher and one for ClusterJobWatcher");
    // The CRD's CEL rules refuse invalid patterns first; without them (a CRD installed by an older
    // release, or edited by hand), the webhook is what refuses at `kubectl apply` time.
    const strip = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(strip);
      if (typeof node !== "object" || node === null) return node;
      return Object.fromEntries(
        Object.entries(node)
          .filter(([k]) => k !== "x-kubernetes-validations")
          .map(([k, v]) => [k, strip(v)]),
      );
    };
    const crd = (
      await readManifests(`${root}/config/crds/jobwatchers.batch.my.github.com.yaml`)
    )[0] as KubeObject;
    await env.installCrds([strip(crd) as KubeObject]);
    t.after(() => env.installCrds([crd]));
    await hooks.register(env.client, "jobwatcher-test", handlers);
    t.after(() => hooks.unregister(env.client, "jobwatcher-test"));
    const spec = { jobNamePatterns: ["build-.*", "(unclosed"], checkIntervalSeconds: 60 };
    const refused = await eventually("the webhook answers", async () => {
      try {
        await env.client.create(JobWatcher.new("bad-pattern", spec, { namespace: ns }));
        await env.client.delete(JobWatcher, "bad-pattern", { namespace: ns });
        return undefined; // the registration is not in effect yet: try again
      } catch (err) {
        if (err instanceof ForbiddenError && /admission webhook/.test(err.message)) return err;
        throw err;
      }
    });
    assert.match(
      refused.message,
      /denied the request: spec\.jobNamePatterns\[1\]: is not a valid RE2 regular expression/,
    );
    // A valid watcher passes the webhook.
    await env.client.create(
      JobWatcher.new(
        "webhook-ok",
        { jobNamePatterns: ["build-.*"], checkIntervalSeconds: 60 },
        { namespace: ns },
      ),
    );
    await env.client.delete(JobWatcher, "webhook-ok", { namespace: ns });
  });
});
