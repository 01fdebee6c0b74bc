/**
 * Credentials that change under a running client: exec plugins (a real child process: a small Node
 * script speaking the ExecCredential protocol) refreshed on expiry and after a 401, and client
 * certificates rotated on disk, seen by an HTTPS server that asks for them.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCertificateAuthority, type CertificateAuthority, type KeyPairPem } from "../pki/index.ts";
import { Transport } from "./transport.ts";
import { CredentialsError, UnauthorizedError } from "./errors.ts";
import type { ExecConfig } from "./config.ts";
import { fakeApiServer, status, type FakeServer, type Handler } from "./testdata/fake-apiserver.ts";
import { parseExecCredential } from "./exec.ts";
import { createLogger } from "../logging/index.ts";

const OK = { status: 200, body: { ok: true } };

/**
 * A plugin that counts its runs in `<dir>/runs`, records its environment in `<dir>/info.json`, and
 * prints token `tok-<run>` (expiring per $EXPIRE: "past", "future" or none), or a certificate from
 * `<dir>/cert.pem`/`key.pem` when $CERT is set, or fails when $FAIL is set.
 */
const PLUGIN = `
const fs = require("node:fs");
const path = require("node:path");
const dir = process.argv[2];
const runsFile = path.join(dir, "runs");
const run = (fs.existsSync(runsFile) ? Number(fs.readFileSync(runsFile, "utf8")) : 0) + 1;
fs.writeFileSync(runsFile, String(run));
fs.writeFileSync(path.join(dir, "info.json"), JSON.stringify({ info: JSON.parse(process.env.KUBERNETES_EXEC_INFO), region: process.env.REGION }));
if (process.env.FAIL) { process.stderr.write("token service said no\\n"); process.exit(3); }
if (process.env.GARBAGE) { process.stdout.write("hello"); process.exit(0); }
const status = {};
if (process.env.CERT) {
  status.clientCertificateData = fs.readFileSync(path.join(dir, "cert.pem"), "utf8");
  status.clientKeyData = fs.readFileSync(path.join(dir, "key.pem"), "utf8");
} else status.token = "tok-" + run;
if (process.env.EXPIRE === "past") status.expirationTimestamp = new Date(Date.now() - 1000).toISOString();
if (process.env.EXPIRE === "future") status.expirationTimestamp = new Date(Date.now() + 3600000).toISOString();
process.stdout.write(JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status }));
`;

let dir: string;
let pluginPath: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "opkit-exec-"));
  pluginPath = join(dir, "plugin.cjs");
  await writeFile(pluginPath, PLUGIN);
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function pluginDir(): Promise<string> {
  return mkdtemp(join(dir, "run-"));
}

function exec(runDir: string, env: Record<string, string> = {}, extra: Partial<ExecConfig> = {}): ExecConfig {
  return {
    command: process.execPath,
    args: [pluginPath, runDir],
    env: Object.entries(env).map(([name, value]) => ({ name, value })),
    apiVersion: "client.authentication.k8s.io/v1",
    ...extra,
  };
}

async function runs(runDir: string): Promise<number> {
  return Number(await readFile(join(runDir, "runs"), "utf8").catch(() => "0"));
}

async function withExec(
  handler: Handler,
  execConfig: ExecConfig,
  fn: (t: Transport, srv: FakeServer) => Promise<void>,
): Promise<void> {
  const srv = await fakeApiServer(handler);
  const t = await Transport.create({ server: srv.url, exec: execConfig }, { sleep: async () => undefined });
  try {
    await fn(t, srv);
  } finally {
    await t.destroy();
    await srv.close();
  }
}

describe("exec credential plugins", () => {
  it("runs the plugin once, passes KUBERNETES_EXEC_INFO and its env, and reuses an unexpired token", async () => {
    const run = await pluginDir();
    await withExec(
      () => OK,
      exec(run, { REGION: "eu", EXPIRE: "future" }, { provideClusterInfo: true }),
      async (t, srv) => {
        await t.request({ method: "GET", path: "/a" });
        await t.request({ method: "GET", path: "/b" });
        assert.deepEqual(
          srv.requests.map((r) => r.headers.authorization),
          ["Bearer tok-1", "Bearer tok-1"],
        );
        assert.equal(await runs(run), 1);
        const seen = JSON.parse(await readFile(join(run, "info.json"), "utf8")) as {
          info: {
            apiVersion: string;
            kind: string;
            spec: { interactive: boolean; cluster?: { server: string } };
          };
          region: string;
        };
        assert.equal(seen.region, "eu");
        assert.equal(seen.info.apiVersion, "client.authentication.k8s.io/v1");
        assert.equal(seen.info.kind, "ExecCredential");
        assert.equal(seen.info.spec.interactive, false);
        assert.equal(seen.info.spec.cluster?.server, srv.url);
      },
    );
  });

  it("runs the plugin again when the credential has expired", async () => {
    const run = await pluginDir();
    await withExec(
      () => OK,
      exec(run, { EXPIRE: "past" }),
      async (t, srv) => {
        await t.request({ method: "GET", path: "/a" });
        await t.request({ method: "GET", path: "/b" });
        assert.deepEqual(
          srv.requests.map((r) => r.headers.authorization),
          ["Bearer tok-1", "Bearer tok-2"],
        );
      },
    );
  });

  it("after a 401, runs the plugin again and retries the request once with the fresh token", async () => {
    const run = await pluginDir();
    await withExec(
      (req) => (req.headers.authorization === "Bearer tok-2" ? OK : status(401, "Unauthorized")),
      exec(run),
      async (t, srv) => {
        assert.deepEqual(await t.request({ method: "POST", path: "/x", body: {} }), { ok: true });
        assert.deepEqual(
          srv.requests.map((r) => r.headers.authorization),
          ["Bearer tok-1", "Bearer tok-2"],
        );
        assert.equal(await runs(run), 2);
      },
    );
  });

  it("a fresh token that is refused too is reported, without running the plugin for every request", async () => {
    const run = await pluginDir();
    await withExec(
      () => status(401, "Unauthorized"),
      exec(run),
      async (t) => {
        await assert.rejects(t.request({ method: "GET", path: "/a" }), UnauthorizedError);
        await assert.rejects(t.request({ method: "GET", path: "/b" }), UnauthorizedError);
        await assert.rejects(t.request({ method: "GET", path: "/c" }), UnauthorizedError);
        assert.equal(await runs(run), 2, "one run, and one refresh within the minimum interval");
      },
    );
  });

  it("reports a failing, missing, babbling or interactive plugin as CredentialsError", async () => {
    const run = await pluginDir();
    const cases: [ExecConfig, RegExp][] = [
      [exec(run, { FAIL: "1" }), /failed \(exit code 3\): token service said no/],
      [exec(run, { GARBAGE: "1" }), /did not print JSON/],
      [
        { ...exec(run), command: "opkit-no-such-plugin", installHint: "install it with: brew install x" },
        /opkit-no-such-plugin was not found: install it with: brew install x/,
      ],
      [{ ...exec(run), interactiveMode: "Always" }, /needs a terminal/],
    ];
    for (const [config, message] of cases) {
      await withExec(
        () => OK,
        config,
        async (t, srv) => {
          await assert.rejects(t.request({ method: "GET", path: "/x" }), (e: unknown) => {
            assert.ok(e instanceof CredentialsError, String(e));
            assert.match(e.message, message);
            return true;
          });
          assert.equal(srv.requests.length, 0);
        },
      );
    }
  });

  it("validates the ExecCredential it reads", () => {
    const v1 = "client.authentication.k8s.io/v1";
    const doc = (status: object, apiVersion = v1): string =>
      JSON.stringify({ apiVersion, kind: "ExecCredential", status });
    assert.throws(
      () => parseExecCredential(doc({ token: "t" }, "client.authentication.k8s.io/v1beta1"), "p", v1),
      /apiVersion/,
    );
    assert.throws(() => parseExecCredential(doc({}), "p", v1), /neither a token nor a client certificate/);
    assert.throws(() => parseExecCredential(doc({ clientKeyData: "k" }), "p", v1), /only one of/);
    assert.throws(
      () => parseExecCredential(doc({ token: "t", expirationTimestamp: "soon" }), "p", v1),
      /RFC 3339/,
    );
    assert.deepEqual(parseExecCredential(doc({ token: "t" }), "p", v1), {
      token: "t",
      clientCertificateData: undefined,
      clientKeyData: undefined,
      expirationTimestamp: undefined,
    });
  });
});

describe("client certificate rotation", () => {
  let ca: CertificateAuthority;
  let serverPair: KeyPairPem;
  let alice: KeyPairPem;
  let bob: KeyPairPem;
  before(async () => {
    ca = await createCertificateAuthority("opkit-test-ca");
    serverPair = await ca.issue({ commonName: "server", hosts: ["127.0.0.1"], usage: "server" });
    alice = await ca.issue({ commonName: "alice", usage: "client" });
    bob = await ca.issue({ commonName: "bob", usage: "client" });
  });

  async function https(handler: Handler): Promise<FakeServer> {
    return fakeApiServer(handler, {
      tls: { cert: serverPair.certPem, key: serverPair.keyPem, ca: ca.certPem, requestCert: true },
    });
  }

  it("re-reads rotated certificate files after the interval: new connections present the new certificate", async () => {
    const run = await pluginDir();
    const certFile = join(run, "tls.crt");
    const keyFile = join(run, "tls.key");
    await writeFile(certFile, alice.certPem);
    await writeFile(keyFile, alice.keyPem);
    const srv = await https(() => OK);
    let clock = 0;
    const events: string[] = [];
    const t = await Transport.create(
      {
        server: srv.url,
        certificateAuthority: { data: ca.certPem },
        clientCertificate: { file: certFile },
        clientKey: { file: keyFile },
      },
      {
        now: () => clock,
        credentialReloadMs: 60_000,
        logger: createLogger({
          destination: {
            write: (line: string) => {
              const o = JSON.parse(line) as { level: string; what: string };
              events.push(`${o.level} ${o.what}`);
            },
          },
        }),
      },
    );
    try {
      await t.request({ method: "GET", path: "/1" });
      // A writer replaces the certificate first: the pair does not match until the key follows.
      await writeFile(certFile, bob.certPem);
      clock += 60_000;
      await t.request({ method: "GET", path: "/2" });
      await writeFile(keyFile, bob.keyPem);
      clock += 30_000;
      await t.request({ method: "GET", path: "/3" });
      clock += 30_000;
      await t.request({ method: "GET", path: "/4" });
      assert.deepEqual(
        srv.requests.map((r) => r.clientCN),
        ["alice", "alice", "alice", "bob"],
      );
      assert.deepEqual(events, ["warn TLS files", "info client certificate, client key"]);
    } finally {
      await t.destroy();
      await srv.close();
    }
  });

  it("after a 401, looks at the certificate files at once", async () => {
    const run = await pluginDir();
    const certFile = join(run, "tls.crt");
    const keyFile = join(run, "tls.key");
    await writeFile(certFile, alice.certPem);
    await writeFile(keyFile, alice.keyPem);
    const srv = await https(async (req) => {
      if (req.clientCN === "bob") return OK;
      await writeFile(certFile, bob.certPem);
      await writeFile(keyFile, bob.keyPem);
      return status(401, "Unauthorized");
    });
    const t = await Transport.create({
      server: srv.url,
      certificateAuthority: { data: ca.certPem },
      clientCertificate: { file: certFile },
      clientKey: { file: keyFile },
    });
    try {
      assert.deepEqual(await t.request({ method: "GET", path: "/x" }), { ok: true });
      assert.deepEqual(
        srv.requests.map((r) => r.clientCN),
        ["alice", "bob"],
      );
    } finally {
      await t.destroy();
      await srv.close();
    }
  });

  it("uses a client certificate an exec plugin returns", async () => {
    const run = await pluginDir();
    await writeFile(join(run, "cert.pem"), bob.certPem);
    await writeFile(join(run, "key.pem"), bob.keyPem);
    const srv = await https(() => OK);
    const t = await Transport.create({
      server: srv.url,
      certificateAuthority: { data: ca.certPem },
      exec: exec(run, { CERT: "1" }),
    });
    try {
      await t.request({ method: "GET", path: "/x" });
      assert.equal(srv.requests[0]?.clientCN, "bob");
      assert.equal(srv.requests[0]?.headers.authorization, undefined);
    } finally {
      await t.destroy();
      await srv.close();
    }
  });

  it("fails at creation, naming the file, when a certificate cannot be read", async () => {
    await assert.rejects(
      Transport.create({
        server: "https://127.0.0.1:1",
        clientCertificate: { file: "/nonexistent/tls.crt" },
        clientKey: { data: alice.keyPem },
      }),
      (e: unknown) =>
        e instanceof CredentialsError && /client certificate \/nonexistent\/tls\.crt/.test(e.message),
    );
  });
});
