/**
 * KubeClient's per-verb policies against a scripted local server: which writes are retried after a 5xx
 * or a lost response (and how an answer to such a retry is reported), that every call takes an
 * AbortSignal, and `withDefaults` views. API semantics themselves are tested against `opkit env` in
 * client.int.test.ts.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeClient } from "./client.ts";
import {
  AlreadyExistsError,
  ConnectionError,
  NotFoundError,
  RequestAbortedError,
  ServerError,
} from "./errors.ts";
import { kindRef, type KubeObject } from "./types.ts";
import {
  CORE_V1_DISCOVERY,
  fakeApiServer,
  status,
  type Action,
  type FakeServer,
  type Recorded,
} from "./testdata/fake-apiserver.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");
const Pods = kindRef<KubeObject>("v1", "Pod");

const cm = (meta: KubeObject["metadata"]): ConfigMap => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { namespace: "ns", ...meta },
});

/**
 * A client against a server that answers discovery, then plays `replies` (the last one repeats) for
 * every other request.
 */
async function scripted(
  ...replies: Action[]
): Promise<{ client: KubeClient; srv: FakeServer; calls: () => Recorded[]; close: () => Promise<void> }> {
  let n = 0;
  const srv = await fakeApiServer((req) => {
    if (req.url === "/api/v1") return CORE_V1_DISCOVERY;
    return replies[Math.min(n++, replies.length - 1)] ?? { status: 200, body: {} };
  });
  const client = await KubeClient.fromConfig(
    { server: srv.url, token: "t" },
    { sleep: async () => undefined, fieldManager: "tester" },
  );
  return {
    client,
    srv,
    calls: () => srv.requests.filter((r) => r.url !== "/api/v1"),
    close: async () => {
      await client.transport.destroy();
      await srv.close();
    },
  };
}

const created = (obj: ConfigMap): Action => ({ status: 201, body: obj });

describe("KubeClient write retries", () => {
  it("create with a fixed name: retried after a lost response; AlreadyExists then is marked ambiguous", async () => {
    const s = await scripted("drop", status(409, "AlreadyExists", 'configmaps "a" already exists'));
    try {
      await assert.rejects(s.client.create(cm({ name: "a" })), (e: unknown) => {
        assert.ok(e instanceof AlreadyExistsError);
        assert.equal(e.ambiguous, true, "the object may be the one the lost attempt created");
        return true;
      });
      assert.equal(s.calls().length, 2);
    } finally {
      await s.close();
    }
  });

  it("create with a fixed name: retried after a 5xx, and succeeds", async () => {
    const s = await scripted(status(500, "InternalError"), created(cm({ name: "a", uid: "u1" })));
    try {
      assert.equal((await s.client.create(cm({ name: "a" }))).metadata.uid, "u1");
      assert.equal(s.calls().length, 2);
    } finally {
      await s.close();
    }
  });

  it("an AlreadyExists on a first attempt is not ambiguous", async () => {
    const s = await scripted(status(409, "AlreadyExists"));
    try {
      await assert.rejects(s.client.create(cm({ name: "a" })), (e: unknown) => {
        return e instanceof AlreadyExistsError && !e.ambiguous;
      });
    } finally {
      await s.close();
    }
  });

  it("create with generateName: never repeated after a 5xx or a lost response (it could create twice)", async () => {
    for (const first of [status(503, "ServiceUnavailable"), "drop" as const]) {
      const s = await scripted(first, created(cm({ name: "g-1" })));
      try {
        await assert.rejects(
          s.client.create(cm({ generateName: "g-" })),
          first === "drop" ? ConnectionError : ServerError,
        );
        assert.equal(s.calls().length, 1);
      } finally {
        await s.close();
      }
    }
  });

  it("create with generateName: repeated after 429 (the server did not process it)", async () => {
    const s = await scripted(
      { ...status(429, "TooManyRequests"), headers: { "retry-after": "1" } },
      created(cm({ name: "g-1" })),
    );
    try {
      assert.equal((await s.client.create(cm({ generateName: "g-" }))).metadata.name, "g-1");
      assert.equal(s.calls().length, 2);
    } finally {
      await s.close();
    }
  });

  it("update: retried after a 5xx only with a resourceVersion", async () => {
    const withRv = await scripted(status(503, "ServiceUnavailable"), {
      status: 200,
      body: cm({ name: "a" }),
    });
    try {
      await withRv.client.update(cm({ name: "a", resourceVersion: "7" }));
      assert.equal(withRv.calls().length, 2);
      assert.equal(withRv.calls()[1]?.method, "PUT");
    } finally {
      await withRv.close();
    }
    const withoutRv = await scripted(status(503, "ServiceUnavailable"), {
      status: 200,
      body: cm({ name: "a" }),
    });
    try {
      await assert.rejects(withoutRv.client.update(cm({ name: "a" })), ServerError);
      assert.equal(
        withoutRv.calls().length,
        1,
        "an unconditional PUT could overwrite a change made in between",
      );
    } finally {
      await withoutRv.close();
    }
  });

  it("patch: merge and strategic retried after a lost response, JSON patch not", async () => {
    for (const type of ["merge", "strategic"] as const) {
      const s = await scripted("drop", { status: 200, body: cm({ name: "a" }) });
      try {
        await s.client.patch(ConfigMaps, "a", { data: { k: "v" } }, { namespace: "ns", type });
        assert.equal(s.calls().length, 2, type);
      } finally {
        await s.close();
      }
    }
    const s = await scripted("drop", { status: 200, body: cm({ name: "a" }) });
    try {
      await assert.rejects(
        s.client.patch(ConfigMaps, "a", [{ op: "add", path: "/data/k", value: "v" }], {
          namespace: "ns",
          type: "json",
        }),
        ConnectionError,
      );
      assert.equal(s.calls().length, 1);
    } finally {
      await s.close();
    }
  });

  it("apply and applyStatus: retried after a 5xx (server-side apply is idempotent)", async () => {
    const s = await scripted(status(500, "InternalError"), { status: 200, body: cm({ name: "a" }) });
    try {
      await s.client.apply(cm({ name: "a" }));
      assert.equal(s.calls().length, 2);
      assert.match(s.calls()[1]?.url ?? "", /fieldManager=tester/);
    } finally {
      await s.close();
    }
  });

  it("delete: a retry that finds the object gone reports success with the server's Status", async () => {
    const s = await scripted("drop", status(404, "NotFound", 'configmaps "a" not found'));
    try {
      const out = (await s.client.delete(ConfigMaps, "a", { namespace: "ns" })) as { reason?: string };
      assert.equal(out.reason, "NotFound");
      assert.equal(s.calls().length, 2);
    } finally {
      await s.close();
    }
  });

  it("delete: a 404 on the first attempt is NotFoundError", async () => {
    const s = await scripted(status(404, "NotFound"));
    try {
      await assert.rejects(s.client.delete(ConfigMaps, "a", { namespace: "ns" }), NotFoundError);
    } finally {
      await s.close();
    }
  });

  it("createSubresource: POSTs the body to the named object's subresource, not retried after a 5xx", async () => {
    const binding = {
      apiVersion: "v1",
      kind: "Binding",
      metadata: { name: "p", namespace: "ns" },
      target: { apiVersion: "v1", kind: "Node", name: "node-1" },
    };
    const s = await scripted(status(500, "InternalError"), { status: 201, body: { kind: "Status" } });
    try {
      await assert.rejects(
        s.client.createSubresource(Pods, "p", "binding", binding, { namespace: "ns" }),
        ServerError,
      );
      assert.equal(s.calls().length, 1, "a binding is not repeated: the pod may be bound already");
      const [call] = s.calls();
      assert.equal(call?.method, "POST");
      assert.match(call?.url ?? "", /^\/api\/v1\/namespaces\/ns\/pods\/p\/binding\?fieldManager=tester$/);
      assert.deepEqual(JSON.parse(call?.body ?? ""), binding);
      await s.client.createSubresource(Pods, "p", "eviction", binding, { namespace: "ns", idempotent: true });
      assert.equal(s.calls().length, 2);
    } finally {
      await s.close();
    }
  });

  it("raw: writes are retried after a 5xx only when marked idempotent", async () => {
    const s = await scripted(status(503, "ServiceUnavailable"), status(503, "ServiceUnavailable"), {
      status: 200,
      body: {},
    });
    try {
      await assert.rejects(s.client.raw("POST", "/apis/x/v1/things", {}), ServerError);
      await s.client.raw("POST", "/apis/x/v1/things", {}, { idempotent: true });
      assert.equal(s.calls().length, 3);
    } finally {
      await s.close();
    }
  });
});

describe("KubeClient aborts", () => {
  it("every call takes a signal and aborts with RequestAbortedError carrying its reason", async () => {
    const s = await scripted("hang");
    const calls: [string, (signal: AbortSignal) => Promise<unknown>][] = [
      ["get", (signal) => s.client.get(ConfigMaps, "a", { namespace: "ns", signal })],
      [
        "get subresource",
        (signal) => s.client.get(Pods, "p", { namespace: "ns", subresource: "status", signal }),
      ],
      ["list", (signal) => s.client.list(ConfigMaps, { namespace: "ns", signal })],
      ["listAll", (signal) => s.client.listAll(ConfigMaps, { namespace: "ns", signal })],
      ["create", (signal) => s.client.create(cm({ name: "a" }), { signal })],
      [
        "create subresource",
        (signal) =>
          s.client.create(
            { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "ns" } },
            { subresource: "eviction", signal },
          ),
      ],
      ["update", (signal) => s.client.update(cm({ name: "a" }), { signal })],
      ["updateStatus", (signal) => s.client.updateStatus(cm({ name: "a" }), { signal })],
      ["patch", (signal) => s.client.patch(ConfigMaps, "a", {}, { namespace: "ns", type: "merge", signal })],
      ["apply", (signal) => s.client.apply(cm({ name: "a" }), { signal })],
      ["applyStatus", (signal) => s.client.applyStatus(cm({ name: "a" }), { signal })],
      ["delete", (signal) => s.client.delete(ConfigMaps, "a", { namespace: "ns", signal })],
      ["deleteAllOf", (signal) => s.client.deleteAllOf(ConfigMaps, { namespace: "ns", signal })],
      ["watch", (signal) => s.client.watch(ConfigMaps, { namespace: "ns", signal })],
      ["raw", (signal) => s.client.raw("GET", "/version", undefined, { signal })],
    ];
    try {
      await s.client.mapping(ConfigMaps); // discovery once, so each call below reaches the server
      for (const [name, call] of calls) {
        const before = s.calls().length;
        const ac = new AbortController();
        const p = call(ac.signal);
        while (s.calls().length === before) await new Promise((r) => setTimeout(r, 2));
        ac.abort(`stop ${name}`);
        await assert.rejects(p, (e: unknown) => {
          assert.ok(e instanceof RequestAbortedError, `${name}: ${String(e)}`);
          assert.equal(e.reason, `stop ${name}`);
          return true;
        });
      }
    } finally {
      await s.close();
    }
  });

  it("aborts a watch stream that is already delivering events", async () => {
    const srv = await fakeApiServer((req) => {
      if (req.url === "/api/v1") return CORE_V1_DISCOVERY;
      return (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write(JSON.stringify({ type: "ADDED", object: cm({ name: "a", resourceVersion: "1" }) }) + "\n");
      };
    });
    const client = await KubeClient.fromConfig({ server: srv.url });
    const ac = new AbortController();
    try {
      const events = await client.watch(ConfigMaps, { namespace: "ns", signal: ac.signal });
      const seen: string[] = [];
      await assert.rejects(async () => {
        for await (const ev of events) {
          seen.push(`${ev.type}:${ev.object.metadata.name ?? ""}`);
          ac.abort(new Error("controller stopping"));
        }
      }, RequestAbortedError);
      assert.deepEqual(seen, ["ADDED:a"]);
    } finally {
      await client.transport.destroy();
      await srv.close();
    }
  });

  it("waits for a kind's discovery through the signal too", async () => {
    const srv = await fakeApiServer(() => "hang");
    const client = await KubeClient.fromConfig({ server: srv.url });
    try {
      const ac = new AbortController();
      const p = client.get(ConfigMaps, "a", { namespace: "ns", signal: ac.signal });
      while (srv.requests.length === 0) await new Promise((r) => setTimeout(r, 2));
      ac.abort("bye");
      await assert.rejects(p, (e: unknown) => e instanceof RequestAbortedError && e.reason === "bye");
    } finally {
      await client.transport.destroy();
      await srv.close();
    }
  });
});

describe("KubeClient.withDefaults", () => {
  it("shares the pool and mapping, defaults the field manager and the signal, and does not close the pool", async () => {
    const s = await scripted({ status: 200, body: cm({ name: "a" }) });
    try {
      const ac = new AbortController();
      const view = s.client.withDefaults({ signal: ac.signal, fieldManager: "reconciler" });
      assert.equal(view.transport, s.client.transport);
      assert.equal(view.mapper, s.client.mapper);
      assert.equal(view.fieldManager, "reconciler");

      await view.apply(cm({ name: "a" }));
      assert.match(s.calls()[0]?.url ?? "", /fieldManager=reconciler/);
      assert.match(
        s.calls()[0]?.headers["user-agent"] ?? "",
        /^tester opkit\//,
        "the client's field manager names it",
      );
      await view.apply(cm({ name: "a" }), { fieldManager: "explicit" });
      assert.match(s.calls()[1]?.url ?? "", /fieldManager=explicit/);
      await s.client.apply(cm({ name: "a" }));
      assert.match(s.calls()[2]?.url ?? "", /fieldManager=tester/, "the parent keeps its own");

      await view.close();
      await s.client.get(ConfigMaps, "a", { namespace: "ns" }); // the pool is still open

      ac.abort("reconcile over");
      await assert.rejects(
        view.get(ConfigMaps, "a", { namespace: "ns" }),
        (e: unknown) => e instanceof RequestAbortedError && e.reason === "reconcile over",
      );
      // A call's own signal and the view's are combined: either aborts.
      const own = new AbortController();
      own.abort("own");
      const fresh = s.client.withDefaults({ signal: new AbortController().signal });
      await assert.rejects(
        fresh.get(ConfigMaps, "a", { namespace: "ns", signal: own.signal }),
        (e: unknown) => e instanceof RequestAbortedError && e.reason === "own",
      );
      await s.client.get(ConfigMaps, "a", { namespace: "ns" }); // the parent is not aborted
    } finally {
      await s.close();
    }
  });
});
