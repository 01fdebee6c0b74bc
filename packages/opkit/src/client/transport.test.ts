/**
 * The transport's policies, driven by a scripted local HTTP server (they are pure logic; the real API
 * server's answers are covered by client.int.test.ts): retries and their backoff, aborts, the
 * User-Agent, server warnings, re-authentication after a 401 and token file rotation.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { createSecureServer } from "node:http2";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import {
  Transport,
  defaultUserAgent,
  parseWarnings,
  retryDelayMs,
  type TransportOptions,
} from "./transport.ts";
import {
  ConnectionError,
  RequestAbortedError,
  ServerError,
  TooManyRequestsError,
  UnauthorizedError,
} from "./errors.ts";
import { FakeClock } from "../clock/index.ts";
import { KubeClient } from "./client.ts";
import { FencedWriteError, WriteFence } from "./fence.ts";
import { createCertificateAuthority } from "../pki/index.ts";
import { fakeApiServer, status, type Handler, type FakeServer } from "./testdata/fake-apiserver.ts";
import type { ClusterConfig } from "./config.ts";

const OK = { status: 200, body: { ok: true } };

/** A scripted server and a transport to it; both closed after `fn`. */
async function withServer(
  handler: Handler,
  fn: (t: Transport, srv: FakeServer) => Promise<void>,
  options: TransportOptions = {},
  config: Partial<ClusterConfig> = {},
): Promise<void> {
  const srv = await fakeApiServer(handler);
  const t = await Transport.create(
    { server: srv.url, token: "t0ken", ...config },
    {
      sleep: async () => undefined,
      ...options,
    },
  );
  try {
    await fn(t, srv);
  } finally {
    await t.destroy();
    await srv.close();
  }
}

/** Answers the requests with `replies` in order, repeating the last one. */
function script(...replies: ReturnType<Handler>[]): Handler {
  return (_req, i) => replies[Math.min(i, replies.length - 1)] ?? OK;
}

describe("Transport retries", () => {
  it("retries GETs on 429 and 5xx, honouring Retry-After, then succeeds", async () => {
    const sleeps: number[] = [];
    await withServer(
      script(
        { ...status(429, "TooManyRequests"), headers: { "retry-after": "2" } },
        status(503, "ServiceUnavailable"),
        OK,
      ),
      async (t, srv) => {
        assert.deepEqual(await t.request({ method: "GET", path: "/x" }), { ok: true });
        assert.equal(srv.requests.length, 3);
        assert.deepEqual(
          sleeps,
          [2000, 400],
          "Retry-After 2 s, then the full backoff of attempt 1 (random 1)",
        );
      },
      { sleep: async (ms) => void sleeps.push(ms), random: () => 1 },
    );
  });

  it("gives up after maxRetries with the typed error", async () => {
    await withServer(
      script(status(429, "TooManyRequests")),
      async (t, srv) => {
        await assert.rejects(t.request({ method: "GET", path: "/x" }), TooManyRequestsError);
        assert.equal(srv.requests.length, 3, "the first attempt and two retries");
      },
      { maxRetries: 2 },
    );
  });

  it("retries every write on 429: the server did not process it", async () => {
    await withServer(
      script({ ...status(429, "TooManyRequests"), headers: { "retry-after": "1" } }, OK),
      async (t, srv) => {
        assert.deepEqual(await t.request({ method: "POST", path: "/x", body: {} }), { ok: true });
        assert.equal(srv.requests.length, 2);
      },
    );
  });

  it("does not retry a write that is not idempotent on 5xx", async () => {
    await withServer(script(status(500, "InternalError"), OK), async (t, srv) => {
      await assert.rejects(t.request({ method: "POST", path: "/x", body: {} }), (e: unknown) => {
        assert.ok(e instanceof ServerError);
        assert.equal(e.ambiguous, false);
        return true;
      });
      assert.equal(srv.requests.length, 1);
    });
  });

  it("does not retry a write that is not idempotent after a lost response", async () => {
    await withServer(script("drop", OK), async (t, srv) => {
      await assert.rejects(t.request({ method: "POST", path: "/x", body: {} }), (e: unknown) => {
        assert.ok(e instanceof ConnectionError, String(e));
        assert.equal(e.beforeSending, false);
        return true;
      });
      assert.equal(srv.requests.length, 1);
    });
  });

  it("hands a 2xx body to its consumer, but never retries a body that broke after the consumer saw part of it", async () => {
    const consume = async (chunks: AsyncIterable<unknown>): Promise<string> => {
      let text = "";
      for await (const c of chunks) text += String(c);
      return text;
    };
    // A 503 before any body is retried as for any GET; the answer that follows is consumed.
    await withServer(
      script(status(503, "ServiceUnavailable"), { status: 200, body: { a: 1 } }),
      async (t, srv) => {
        assert.equal(await t.request({ method: "GET", path: "/x" }, consume), '{"a":1}');
        assert.equal(srv.requests.length, 2);
      },
    );
    // Half a body, then the connection drops: a ConnectionError after one attempt (a second answer could differ).
    const half = (res: ServerResponse): void => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"items":[');
      setTimeout(() => res.socket?.destroy(), 20);
    };
    await withServer(script(half, OK), async (t, srv) => {
      await assert.rejects(t.request({ method: "GET", path: "/x" }, consume), ConnectionError);
      assert.equal(srv.requests.length, 1);
    });
  });

  it("retries an idempotent write after a 5xx and a lost response, marking later errors ambiguous", async () => {
    await withServer(
      script(status(503, "ServiceUnavailable"), "drop", status(409, "AlreadyExists")),
      async (t, srv) => {
        await assert.rejects(
          t.request({ method: "POST", path: "/x", body: {}, idempotent: true }),
          (e: unknown) => {
            assert.ok(e instanceof Error && e.name === "AlreadyExistsError", String(e));
            assert.equal((e as { ambiguous?: boolean }).ambiguous, true);
            assert.match(e.message, /earlier attempt/);
            return true;
          },
        );
        assert.equal(srv.requests.length, 3);
      },
    );
  });

  it("does not retry 501 Not Implemented", async () => {
    await withServer(script(status(501, "NotImplemented"), OK), async (t, srv) => {
      await assert.rejects(t.request({ method: "GET", path: "/x" }), ServerError);
      assert.equal(srv.requests.length, 1);
    });
  });

  it("retries any request whose connection was refused before sending, once the server is up", async () => {
    // Reserve a port, release it, and start the server there only during the first retry wait.
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    let srv: FakeServer | undefined;
    const t = await Transport.create(
      { server: `http://127.0.0.1:${port}` },
      { sleep: async () => void (srv ??= await fakeApiServer(() => OK, { port })) },
    );
    try {
      // A POST whose name the server picks (generateName) is safe to repeat only because it never left.
      assert.deepEqual(await t.request({ method: "POST", path: "/x", body: {} }), { ok: true });
      assert.equal(srv?.requests.length, 1);
    } finally {
      await t.destroy();
      await srv?.close();
    }
  });

  // The 2 s test timeout is what fails a real 5 s timer: only the fake clock can end the grace period.
  it(
    "close waits its grace period on the injected clock for a request in flight, then cuts it",
    { timeout: 2_000 },
    async () => {
      const clock = new FakeClock();
      await withServer(
        () => "hang",
        async (t, srv) => {
          const inFlight = t.request({ method: "GET", path: "/slow" }).catch((err: unknown) => err);
          while (srv.requests.length === 0) await new Promise((r) => setImmediate(r));
          let closed = false;
          const closing = t.close(5_000).then(() => (closed = true));
          await new Promise((r) => setTimeout(r, 50));
          assert.equal(closed, false, "the grace period has not passed on the clock");
          clock.advance(5_000);
          await closing;
          assert.ok((await inFlight) instanceof Error, "the hung request was cut");
        },
        { clock },
      );
    },
  );

  it("does not retry requests on a closed transport", async () => {
    let sleeps = 0;
    await withServer(
      () => OK,
      async (t, srv) => {
        await t.close();
        await assert.rejects(t.request({ method: "GET", path: "/x" }), /the client is closed/);
        assert.equal(srv.requests.length, 0);
        assert.equal(sleeps, 0);
      },
      { sleep: async () => void sleeps++ },
    );
  });

  it("backs off with equal jitter: a random point in the upper half of the doubling delay", () => {
    assert.equal(retryDelayMs(0, 2), 2000);
    assert.equal(retryDelayMs(0, 120), 30_000, "Retry-After is capped at 30 s");
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5].map((a) => retryDelayMs(a, undefined, () => 1)),
      [200, 400, 800, 1600, 3200, 5000],
    );
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5].map((a) => retryDelayMs(a, undefined, () => 0)),
      [100, 200, 400, 800, 1600, 2500],
    );
  });

  it("spaces requests by the optional client-side rate limit (qps 10, burst 2)", async () => {
    let clock = 0;
    const sleeps: number[] = [];
    await withServer(
      () => OK,
      async (t, srv) => {
        for (let i = 0; i < 5; i++) await t.request({ method: "GET", path: "/x" });
        assert.equal(srv.requests.length, 5);
        assert.deepEqual(sleeps, [100, 100, 100], "the burst passes at once; then one request per 100 ms");
      },
      {
        qps: 10,
        burst: 2,
        now: () => clock,
        sleep: async (ms) => {
          sleeps.push(Math.round(ms));
          clock += ms;
        },
      },
    );
  });
});

describe("Transport aborts", () => {
  it("aborts a request in flight with RequestAbortedError carrying the signal's reason", async () => {
    await withServer(
      () => "hang",
      async (t, srv) => {
        const ac = new AbortController();
        const p = t.request({ method: "GET", path: "/slow", signal: ac.signal });
        while (srv.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
        const reason = new Error("reconcile timed out");
        ac.abort(reason);
        await assert.rejects(p, (e: unknown) => {
          assert.ok(e instanceof RequestAbortedError);
          assert.equal(e.name, "AbortError");
          assert.equal(e.reason, reason);
          assert.equal(e.cause, reason);
          assert.match(e.message, /GET \/slow: aborted: reconcile timed out/);
          return true;
        });
      },
    );
  });

  it("aborts a retry wait, even when the injected sleep ignores the signal", async () => {
    const ac = new AbortController();
    await withServer(
      () => status(503, "ServiceUnavailable"),
      async (t, srv) => {
        await assert.rejects(
          t.request({ method: "GET", path: "/x", signal: ac.signal }),
          RequestAbortedError,
        );
        assert.equal(srv.requests.length, 1, "no attempt after the abort");
      },
      {
        sleep: () => {
          ac.abort("shutting down");
          return new Promise(() => undefined); // never wakes
        },
      },
    );
  });

  it("sends nothing for a signal that is already aborted", async () => {
    await withServer(
      () => OK,
      async (t, srv) => {
        await assert.rejects(
          t.request({ method: "DELETE", path: "/x", signal: AbortSignal.abort("gone") }),
          (e: unknown) => e instanceof RequestAbortedError && e.reason === "gone",
        );
        assert.equal(srv.requests.length, 0);
      },
    );
  });
});

describe("Transport protocol", () => {
  it("speaks HTTP/1.1 to a server that offers HTTP/2 too, keeping connections alive", async () => {
    const ca = await createCertificateAuthority("opkit-h1-test-ca");
    const serving = await ca.issue({ commonName: "127.0.0.1", hosts: ["127.0.0.1"], usage: "server" });
    const seen: { version: string; alpn: string | false | null; socket: object }[] = [];
    // As kube-apiserver does: ALPN offers h2 and http/1.1.
    const server = createSecureServer(
      { cert: serving.certPem, key: serving.keyPem, allowHTTP1: true },
      (req, res) => {
        const socket = req.socket as TLSSocket;
        seen.push({ version: req.httpVersion, alpn: socket.alpnProtocol, socket });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ ok: true }));
      },
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as AddressInfo).port;
    const t = await Transport.create({
      server: `https://127.0.0.1:${port}`,
      certificateAuthority: { data: ca.certPem },
      token: "t",
    });
    try {
      for (let i = 0; i < 6; i++)
        assert.deepEqual(await t.request({ method: "GET", path: `/x${i}` }), { ok: true });
      assert.deepEqual(
        seen.map((s) => `${s.version} ${s.alpn}`),
        Array<string>(6).fill("1.1 http/1.1"),
      );
      // Not a connection per request. (undici hands the second request a second connection while the
      // first is being released, then reuses both; hence at most two.)
      const sockets = new Set(seen.map((s) => s.socket)).size;
      assert.ok(sockets <= 2, `${sockets} connections for 6 requests`);
    } finally {
      await t.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe("Transport dead connections", () => {
  it("a request silent past its idle timeout leaves the pool's other requests alone: a watch in flight ends whole", async () => {
    // 3 s of events: undici's timers tick every ~0.5 s, so the 100 ms timeout fires within ~1 s.
    const events = 60;
    await withServer(
      (req) => {
        if (req.url.startsWith("/slow")) return "hang";
        if (req.url.startsWith("/watch"))
          return (res: ServerResponse) => {
            res.writeHead(200, { "content-type": "application/json" });
            let i = 0;
            const timer = setInterval(() => {
              res.write(`${JSON.stringify({ type: "ADDED", object: { i } })}\n`);
              if (++i === events) {
                clearInterval(timer);
                res.end();
              }
            }, 50);
          };
        return OK;
      },
      async (t) => {
        const body = await t.stream({ method: "GET", path: "/watch", query: { watch: true } });
        await assert.rejects(
          t.request({ method: "POST", path: "/slow", body: {}, idleTimeoutMs: 100 }),
          ConnectionError,
        );
        let text = "";
        for await (const chunk of body) text += String(chunk);
        assert.equal(text.trim().split("\n").length, events, "the watch was not cut");
        assert.deepEqual(await t.request({ method: "GET", path: "/after" }), { ok: true });
      },
    );
  });
});

describe("Transport headers", () => {
  it("encodes query values as the API server decodes them, a lone surrogate as U+FFFD (not a ConnectionError)", async () => {
    await withServer(
      () => OK,
      async (t, srv) => {
        const values = {
          labelSelector: "a!=b,c in (x, y),d+e=ü",
          fieldSelector: "status.phase!=Running",
          continue: "eyJ2Ijoi+/=",
          // What slicing a label value in the middle of an emoji leaves: a selector the server rejects.
          shardSelector: "app=\ud83d",
        };
        await t.request({ method: "GET", path: "/x", query: { ...values, limit: 5, watch: true } });
        assert.equal(srv.requests.length, 1, "sent once");
        const got = new URL(srv.requests[0]?.url ?? "", "http://h").searchParams;
        assert.deepEqual(Object.fromEntries(got), {
          ...values,
          shardSelector: "app=\ufffd",
          limit: "5",
          watch: "true",
        });
      },
    );
  });

  it("sends a User-Agent naming opkit, the platform and Node, after the operator's name", async () => {
    await withServer(
      () => OK,
      async (t, srv) => {
        await t.request({ method: "GET", path: "/x" });
        const ua = srv.requests[0]?.headers["user-agent"] ?? "";
        assert.match(ua, /^opkit\/\d+\.\d+\.\d+\S* \(\w+\/\w+\) node\/v\d+/);
        assert.equal(
          ua,
          `opkit/${ua.split(" ")[0]?.split("/")[1] ?? ""} (${process.platform}/${process.arch}) node/${process.version}`,
        );
      },
    );
    const srv = await fakeApiServer(() => OK);
    const t = await Transport.create({ server: srv.url }, { userAgent: defaultUserAgent("copy operator") });
    try {
      await t.request({ method: "GET", path: "/x" });
      assert.match(
        srv.requests[0]?.headers["user-agent"] ?? "",
        /^copy-operator opkit\//,
        "one product token",
      );
    } finally {
      await t.destroy();
      await srv.close();
    }
  });

  it("reports each distinct server warning once", async () => {
    const seen: string[] = [];
    const warn = (text: string): { status: number; body: unknown; headers: Record<string, string> } => ({
      status: 200,
      body: {},
      headers: { warning: `299 - "${text.replace(/["\\]/g, "\\$&")}"` },
    });
    await withServer(
      script(warn("v1beta1 is deprecated"), warn("v1beta1 is deprecated"), warn('unknown field "spec.x"')),
      async (t) => {
        for (let i = 0; i < 3; i++) await t.request({ method: "GET", path: `/x${i}` });
        assert.deepEqual(seen, ["v1beta1 is deprecated", 'unknown field "spec.x"']);
      },
      { onWarning: (w) => void seen.push(w.text) },
    );
  });

  it("parses several warnings in one header, escaped quotes, and malformed values whole", () => {
    assert.deepEqual(parseWarnings('299 - "a, b", 299 - "say \\"hi\\""'), ["a, b", 'say "hi"']);
    assert.deepEqual(parseWarnings(['299 - "one"', "just text"]), ["one", "just text"]);
  });

  it("sends impersonation and bearer headers", async () => {
    await withServer(
      () => OK,
      async (t, srv) => {
        await t.request({ method: "GET", path: "/x" });
        const h = srv.requests[0]?.headers ?? {};
        assert.equal(h.authorization, "Bearer t0ken");
        assert.equal(h["impersonate-user"], "jane");
        assert.equal(h["impersonate-group"], "a, b");
      },
      {},
      { impersonate: { user: "jane", groups: ["a", "b"] } },
    );
  });
});

describe("Transport credentials", () => {
  it("re-reads a token file after a 401 and retries once with the new token", async () => {
    const dir = await mkdtemp(join(tmpdir(), "opkit-token-"));
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, "old\n");
    try {
      await withServer(
        async (req) => {
          if (req.headers.authorization === "Bearer new") return OK;
          await writeFile(tokenFile, "new\n"); // rotated before the reload interval elapsed
          return status(401, "Unauthorized");
        },
        async (t, srv) => {
          assert.deepEqual(await t.request({ method: "POST", path: "/x", body: {} }), { ok: true });
          assert.deepEqual(
            srv.requests.map((r) => r.headers.authorization),
            ["Bearer old", "Bearer new"],
          );
        },
        {},
        { token: undefined, tokenFile },
      );
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it("does not retry a 401 that fresh credentials cannot cure", async () => {
    await withServer(script(status(401, "Unauthorized"), OK), async (t, srv) => {
      await assert.rejects(t.request({ method: "GET", path: "/x" }), UnauthorizedError);
      assert.equal(srv.requests.length, 1);
    });
  });

  it("re-reads a token file at most every interval (rotated service account tokens)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "opkit-token-"));
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, "one");
    let clock = 0;
    try {
      await withServer(
        () => OK,
        async (t, srv) => {
          await t.request({ method: "GET", path: "/x" });
          await writeFile(tokenFile, "two");
          clock += 59_000;
          await t.request({ method: "GET", path: "/x" });
          clock += 1_000;
          await t.request({ method: "GET", path: "/x" });
          assert.deepEqual(
            srv.requests.map((r) => r.headers.authorization),
            ["Bearer one", "Bearer one", "Bearer two"],
          );
        },
        { now: () => clock, credentialReloadMs: 60_000 },
        { token: undefined, tokenFile },
      );
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it("delegates an auth-provider (oidc) to @kubernetes/client-node, loaded on first use", async () => {
    const b64 = (o: object): string => Buffer.from(JSON.stringify(o)).toString("base64url");
    const idToken = `${b64({ alg: "none" })}.${b64({ exp: Math.floor(Date.now() / 1000) + 3600 })}.sig`;
    await withServer(
      () => OK,
      async (t, srv) => {
        await t.request({ method: "GET", path: "/x" });
        assert.equal(srv.requests[0]?.headers.authorization, `Bearer ${idToken}`);
      },
      {},
      {
        token: undefined,
        authProvider: {
          name: "oidc",
          config: { "id-token": idToken, "idp-issuer-url": "https://issuer.invalid", "client-id": "opkit" },
        },
      },
    );
  });
});

describe("Transport write fence", () => {
  it("refuses a write while the fence is closed, without sending it; reads of a fenced client pass", async () => {
    const fence = new WriteFence({ clock: new FakeClock(), name: "lease ns/l" });
    await withServer(
      () => OK,
      async (t, srv) => {
        await assert.rejects(
          t.request({ method: "PATCH", path: "/w", body: {}, fence }),
          (e: unknown) =>
            e instanceof FencedWriteError && !e.inFlight && /PATCH \/w: not sent/.test(e.message),
        );
        assert.equal(srv.requests.length, 0, "nothing reached the server");
        const client = (await KubeClient.fromConfig({ server: srv.url, token: "t" })).withDefaults({ fence });
        try {
          assert.deepEqual(await client.raw("GET", "/r"), { ok: true });
          await assert.rejects(client.raw("POST", "/w", {}), FencedWriteError);
          assert.deepEqual(
            srv.requests.map((r) => `${r.method} ${r.url}`),
            ["GET /r"],
          );
        } finally {
          await client.transport.destroy();
        }
      },
    );
  });

  it("cuts a write in flight when the fence closes, destroying its connection, and does not retry it", async () => {
    const clock = new FakeClock();
    const fence = new WriteFence({ clock });
    fence.openUntil(1_000);
    let socketClosed: Promise<void> | undefined;
    await withServer(
      () => (res) => {
        socketClosed = new Promise((r) => res.socket?.once("close", () => r()));
      },
      async (t, srv) => {
        const p = t.request({ method: "PUT", path: "/w", body: {}, fence, idempotent: true });
        while (srv.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
        clock.advance(1_000);
        await assert.rejects(p, (e: unknown) => e instanceof FencedWriteError && e.inFlight);
        await socketClosed;
        assert.equal(srv.requests.length, 1, "an idempotent write cut by the fence is not retried");
      },
    );
  });
});

describe("Transport write fence, answers", () => {
  it("cuts a write whose answer is being read when the fence closes, and does not retry it", async () => {
    const clock = new FakeClock();
    const fence = new WriteFence({ clock });
    fence.openUntil(1_000);
    let headersSent = false;
    await withServer(
      () => (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"partial":');
        headersSent = true;
      },
      async (t, srv) => {
        const p = t.request({ method: "PUT", path: "/w", body: {}, fence, idempotent: true });
        while (!headersSent) await new Promise((r) => setTimeout(r, 5));
        await new Promise((r) => setTimeout(r, 50));
        clock.advance(1_000);
        await assert.rejects(p, (e: unknown) => e instanceof FencedWriteError && e.inFlight);
        assert.equal(srv.requests.length, 1, "not retried");
      },
    );
  });
});
