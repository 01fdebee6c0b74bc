/**
 * The webhook server on loopback with a generated certificate, driven by hand-made requests: hostile
 * bodies get a 400 with a clear message and the server keeps serving; TLS below 1.2 is refused; a
 * certificate rotated on disk is served to the next connection; readiness follows the listener.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:https";
import { connect } from "node:tls";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as Type from "typebox/type";
import { defineKind } from "../index.ts";
import { createLogger } from "../logging/index.ts";
import { Metrics } from "../metrics/index.ts";
import {
  CertificateError,
  WebhookServer,
  WebhookServerConfigError,
  validator,
  writeServingCertificate,
  type ServingCertificate,
} from "./index.ts";

const Thing = defineKind({
  group: "unit.opkit.dev",
  version: "v1",
  kind: "Thing",
  spec: Type.Object({ n: Type.Integer() }),
});

const v = validator(Thing, {
  create: (obj) => {
    if (obj.spec.n === 13) throw new Error("unlucky handler bug");
    return obj.spec.n < 0 ? { allowed: false, message: "n must not be negative" } : undefined;
  },
});

interface Reply {
  status: number;
  body: string;
}

function post(
  port: number,
  ca: string,
  path: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        ca,
        // A new connection per request: rotation applies to new connections (kept-alive ones keep theirs).
        agent: false,
        headers: { "content-type": "application/json", ...headers },
      },
      (res) => {
        let data = "";
        res.on("data", (d: Buffer) => (data += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: data }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function review(n: number): string {
  return JSON.stringify({
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: `uid-${n}`,
      kind: { group: "unit.opkit.dev", version: "v1", kind: "Thing" },
      resource: { group: "unit.opkit.dev", version: "v1", resource: "things" },
      operation: "CREATE",
      userInfo: {},
      object: Thing.new("t", { n }, { namespace: "ns" }),
    },
  });
}

describe("WebhookServer", () => {
  let dir: string;
  let cert: ServingCertificate;
  let server: WebhookServer;
  const metrics = new Metrics({ processMetrics: false });
  const path = v.path;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "opkit-webhook-unit-"));
    cert = await writeServingCertificate(dir);
    server = new WebhookServer({
      handlers: [v],
      host: "127.0.0.1",
      port: 0,
      certDir: dir,
      maxRequestBytes: 64 * 1024,
      metrics,
      logger: createLogger({ level: "silent" }),
    });
    await server.start();
  });
  after(async () => {
    await server?.stop(0);
    await rm(dir, { recursive: true, force: true });
  });

  it("answers an AdmissionReview: allowed, denied, and a handler exception as a denial", async () => {
    const ok = await post(server.port, cert.caPem, path, review(1));
    assert.equal(ok.status, 200);
    assert.deepEqual(JSON.parse(ok.body), {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      response: { uid: "uid-1", allowed: true },
    });
    const denied = JSON.parse((await post(server.port, cert.caPem, path, review(-1))).body) as {
      response: { allowed: boolean; status: { message: string } };
    };
    assert.equal(denied.response.allowed, false);
    assert.equal(denied.response.status.message, "n must not be negative");
    const bug = JSON.parse((await post(server.port, cert.caPem, path, review(13))).body) as {
      response: { allowed: boolean; status: { message: string; code: number } };
    };
    assert.equal(bug.response.allowed, false);
    assert.equal(bug.response.status.message, "webhook handler failed: unlucky handler bug");
  });

  const bad: [string, () => string | Buffer, Record<string, string>, RegExp][] = [
    ["malformed JSON", () => "{", {}, /not valid JSON/],
    [
      "a truncated body",
      () => review(1).slice(0, 100),
      {},
      /not valid JSON: .*(Unterminated|Unexpected end)/,
    ],
    [
      "an oversized body (declared)",
      () => Buffer.alloc(65 * 1024, "a"),
      {},
      /exceeds the limit of 65536 bytes/,
    ],
    [
      "an oversized body (chunked, no length)",
      () => Buffer.alloc(200 * 1024, "a"),
      { "transfer-encoding": "chunked" },
      /exceeds the limit of 65536 bytes/,
    ],
    [
      "the wrong content type",
      () => review(1),
      { "content-type": "text/plain" },
      /must be application\/json/,
    ],
    [
      "a ConversionReview on an admission path",
      () => JSON.stringify({ apiVersion: "apiextensions.k8s.io/v1", kind: "ConversionReview", request: {} }),
      {},
      /this endpoint accepts a AdmissionReview/,
    ],
  ];
  for (const [name, body, headers, message] of bad) {
    it(`answers ${name} with a 400 that says why`, async () => {
      const r = await post(server.port, cert.caPem, path, body(), headers);
      assert.equal(r.status, 400);
      assert.match(r.body, message);
    });
  }

  it("404 for an unknown path, 405 for GET; still serving afterwards", async () => {
    const missing = await post(server.port, cert.caPem, "/nope", review(1));
    assert.equal(missing.status, 404);
    assert.match(missing.body, /no webhook is served at \/nope; paths: \/validate-unit-opkit-dev-v1-thing/);
    const get = await new Promise<number>((resolve, reject) => {
      request({ host: "127.0.0.1", port: server.port, path, method: "GET", ca: cert.caPem }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on("error", reject)
        .end();
    });
    assert.equal(get, 405);
    assert.equal((await post(server.port, cert.caPem, path, review(2))).status, 200);
  });

  it("survives a client that closes mid-body", async () => {
    await new Promise<void>((resolve) => {
      const req = request({
        host: "127.0.0.1",
        port: server.port,
        path,
        method: "POST",
        ca: cert.caPem,
        headers: { "content-type": "application/json", "content-length": "5000" },
      });
      req.on("error", () => resolve());
      req.write(review(1).slice(0, 50), () => req.destroy());
    });
    assert.equal((await post(server.port, cert.caPem, path, review(3))).status, 200);
  });

  it("counts requests by code, and keeps nothing in flight", async () => {
    const text = await metrics.text();
    assert.match(
      text,
      /controller_runtime_webhook_requests_total\{webhook="\/validate-unit-opkit-dev-v1-thing",code="200"\} [4-9]/,
    );
    assert.match(
      text,
      /controller_runtime_webhook_requests_total\{webhook="\/validate-unit-opkit-dev-v1-thing",code="400"\} [5-9]/,
    );
    assert.match(
      text,
      /controller_runtime_webhook_requests_in_flight\{webhook="\/validate-unit-opkit-dev-v1-thing"\} 0/,
    );
  });

  it("refuses TLS 1.1", async () => {
    const err = await new Promise<Error | undefined>((resolve) => {
      const s = connect({
        host: "127.0.0.1",
        port: server.port,
        ca: cert.caPem,
        maxVersion: "TLSv1.1",
        minVersion: "TLSv1",
      });
      s.once("secureConnect", () => {
        s.end();
        resolve(undefined);
      });
      s.once("error", (e: Error) => resolve(e));
    });
    assert.ok(err, "a TLS 1.1 handshake must fail");
  });

  it("serves a certificate rotated on disk to the next connection; a half-written pair is skipped", async () => {
    // A new CA: the old one no longer verifies the server once it reloads.
    const next = await writeServingCertificate(dir);
    const reply = await post(server.port, next.caPem, path, review(4));
    assert.equal(reply.status, 200);
    assert.equal(server.certificateReloads, 1);
    await assert.rejects(post(server.port, cert.caPem, path, review(5)), /certificate|self-signed|verify/i);
    // Garbage in the key file: the server keeps the last good pair.
    await writeFile(join(dir, "tls.key"), "not a key");
    assert.equal((await post(server.port, next.caPem, path, review(6))).status, 200);
    assert.equal(server.certificateReloads, 1);
    cert = await writeServingCertificate(dir, { ca: next.ca });
    assert.equal((await post(server.port, next.caPem, path, review(7))).status, 200);
    assert.equal(server.certificateReloads, 2);
  });

  it("is ready while it serves, not after it stopped", async () => {
    assert.deepEqual(await server.readyCheck(), { ok: true });
    const other = new WebhookServer({ handlers: [v], host: "127.0.0.1", port: 0, certDir: dir });
    assert.equal((await other.readyCheck()).ok, false);
    await other.start();
    assert.equal((await other.readyCheck()).ok, true);
    await other.stop(0);
    assert.equal((await other.readyCheck()).ok, false);
  });

  it("refuses to start without a certificate, naming the file; refuses two handlers on one path", async () => {
    const empty = await mkdtemp(join(tmpdir(), "opkit-webhook-empty-"));
    try {
      const s = new WebhookServer({ handlers: [v], host: "127.0.0.1", port: 0, certDir: empty });
      await assert.rejects(s.start(), (err: unknown) => {
        assert.ok(err instanceof CertificateError);
        assert.match(err.message, /tls\.crt: not found/);
        return true;
      });
      await writeFile(join(empty, "tls.crt"), "not a certificate");
      await writeFile(join(empty, "tls.key"), "not a key");
      await assert.rejects(s.start(), /do not hold a usable PEM certificate and matching key/);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
    assert.throws(() => new WebhookServer({ handlers: [v, v] }), WebhookServerConfigError);
  });
});
