/**
 * The transport against the real API server: who the server thinks we are while tokens and client
 * certificates rotate on disk (SelfSubjectReview), re-authentication after a real 401, an exec plugin
 * handing out real service account tokens, the User-Agent as the server records it, server warnings,
 * an aborted watch, and requests through a CONNECT proxy with the server's real TLS.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeClient } from "./client.ts";
import { loadClusterConfig, type ClusterConfig } from "./config.ts";
import { RequestAbortedError, UnauthorizedError } from "./errors.ts";
import { kindRef, type KubeObject } from "./types.ts";
import { loadCertificateAuthority } from "../pki/index.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");

/** The user the API server authenticates this client as. */
async function whoAmI(client: KubeClient): Promise<string> {
  const review = await client.raw<{ status?: { userInfo?: { username?: string } } }>(
    "POST",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  );
  return review.status?.userInfo?.username ?? "";
}

describe("Transport against opkit env", () => {
  let env: TestEnv;
  let ns: string;
  let dir: string;
  let base: ClusterConfig;
  /** The server and its CA, without the admin's credentials. */
  let server: Pick<ClusterConfig, "server" | "certificateAuthority">;
  const clients: KubeClient[] = [];

  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("transport");
    dir = await mkdtemp(join(tmpdir(), "opkit-transport-int-"));
    base = await loadClusterConfig({ kubeconfig: env.kubeconfigPath });
    server = { server: base.server, certificateAuthority: base.certificateAuthority };
  });
  after(async () => {
    for (const c of clients) await c.close();
    await rm(dir, { recursive: true, force: true });
    await env?.cleanup();
  });

  async function client(config: ClusterConfig, options: Parameters<typeof KubeClient.fromConfig>[1] = {}) {
    const c = await KubeClient.fromConfig(config, { sleep: async () => undefined, ...options });
    clients.push(c);
    return c;
  }

  /** A fresh token for a new ServiceAccount `name` in the test namespace. */
  async function serviceAccountToken(name: string): Promise<string> {
    await env.client.create({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: ns } });
    const req = await env.client.raw<{ status: { token: string } }>(
      "POST",
      `/api/v1/namespaces/${ns}/serviceaccounts/${name}/token`,
      { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 600 } },
    );
    return req.status.token;
  }

  it("follows a rotated token file: re-read after the interval, and at once after a 401", async () => {
    const [a, b, c] = await Promise.all(["sa-a", "sa-b", "sa-c"].map(serviceAccountToken));
    const tokenFile = join(dir, "token");
    await writeFile(tokenFile, a ?? "");
    let clock = 0;
    const sa = await client({ ...server, tokenFile }, { now: () => clock, credentialReloadMs: 60_000 });
    assert.equal(await whoAmI(sa), `system:serviceaccount:${ns}:sa-a`);
    await writeFile(tokenFile, b ?? "");
    assert.equal(await whoAmI(sa), `system:serviceaccount:${ns}:sa-a`, "within the interval: the old token");
    clock += 60_000;
    assert.equal(await whoAmI(sa), `system:serviceaccount:${ns}:sa-b`);

    // A token the server refuses, replaced before the interval: the 401 makes the client look again.
    await writeFile(tokenFile, "not-a-token");
    clock += 60_000;
    await assert.rejects(whoAmI(sa), UnauthorizedError);
    await writeFile(tokenFile, c ?? "");
    assert.equal(await whoAmI(sa), `system:serviceaccount:${ns}:sa-c`);
  });

  it("follows rotated client certificate files: new connections present the new certificate", async () => {
    const pki = join(env.controlPlane.dir, "pki");
    const ca = await loadCertificateAuthority(
      await readFile(join(pki, "ca.crt"), "utf8"),
      await readFile(join(pki, "ca.key"), "utf8"),
    );
    const alice = await ca.issue({ commonName: "opkit-alice", usage: "client" });
    const bob = await ca.issue({ commonName: "opkit-bob", usage: "client" });
    const cert = join(dir, "tls.crt");
    const key = join(dir, "tls.key");
    await writeFile(cert, alice.certPem);
    await writeFile(key, alice.keyPem);
    let clock = 0;
    const user = await client(
      { ...server, clientCertificate: { file: cert }, clientKey: { file: key } },
      { now: () => clock, credentialReloadMs: 30_000 },
    );
    assert.equal(await whoAmI(user), "opkit-alice");
    await writeFile(cert, bob.certPem);
    await writeFile(key, bob.keyPem);
    clock += 30_000;
    assert.equal(await whoAmI(user), "opkit-bob");
  });

  it("gets real tokens from an exec plugin, and runs it again when the server refuses one", async () => {
    const good = await serviceAccountToken("sa-exec");
    const tokenFile = join(dir, "exec-token");
    await writeFile(tokenFile, "expired-token");
    // The plugin prints whatever the file holds, like a cloud CLI printing its current token.
    const plugin = join(dir, "plugin.cjs");
    await writeFile(
      plugin,
      `const token = require("node:fs").readFileSync(process.argv[2], "utf8");
process.stdout.write(JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token } }));`,
    );
    let clock = 0;
    const viaExec = await client(
      {
        ...server,
        exec: {
          command: process.execPath,
          args: [plugin, tokenFile],
          apiVersion: "client.authentication.k8s.io/v1",
        },
      },
      { now: () => clock },
    );
    // Refused, run again, refused again: the call fails.
    await assert.rejects(whoAmI(viaExec), UnauthorizedError);
    await writeFile(tokenFile, good);
    clock += 10_000; // the plugin is re-run after a 401 at most every 10 s
    // The cached token is refused; the plugin runs again and the call succeeds with its new token.
    assert.equal(await whoAmI(viaExec), `system:serviceaccount:${ns}:sa-exec`);
  });

  it("sends a User-Agent the server records (the field manager it derives for writes without one)", async () => {
    const named = await client(base, { fieldManager: "ua-check" });
    const made = await named.raw<ConfigMap>("POST", `/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "ua" },
      data: { k: "v" }, // an object with no fields of its own gets no managedFields entry
    });
    // The server names the manager after the User-Agent's text before the first "/".
    assert.deepEqual(
      made.metadata.managedFields?.map((f) => f.manager),
      ["ua-check opkit"],
    );
  });

  it("reports each distinct server warning once", async () => {
    const warnings: string[] = [];
    const c = await client(base, { onWarning: (w) => void warnings.push(w.text) });
    for (const name of ["w1", "w2"]) {
      await c.raw("POST", `/api/v1/namespaces/${ns}/configmaps?fieldValidation=Warn`, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name },
        notAField: true,
      });
    }
    assert.deepEqual(warnings, ['unknown field "notAField"']);
  });

  it("aborts an open watch with the signal's reason", async () => {
    await env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "seen", namespace: ns },
    });
    const ac = new AbortController();
    const events = await env.client.watch(ConfigMaps, {
      namespace: ns,
      signal: ac.signal,
      sendInitialEvents: true,
    });
    const reason = new Error("reconcile cancelled");
    await assert.rejects(
      async () => {
        for await (const ev of events) {
          if (ev.object.metadata.name === "seen") ac.abort(reason);
        }
      },
      (e: unknown) => e instanceof RequestAbortedError && e.reason === reason,
    );
  });

  it("reaches the server through the cluster's proxy-url, verifying its real certificate", async () => {
    const tunnels: string[] = [];
    const sockets = new Set<Socket>();
    const proxy: Server = createServer((_req, res) => res.writeHead(405).end());
    proxy.on("connect", (req, conn: Socket, head: Buffer) => {
      tunnels.push(req.url ?? "");
      const [host, port] = (req.url ?? "").split(":");
      const upstream = connect(Number(port), host ?? "", () => {
        conn.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        upstream.write(head);
        upstream.pipe(conn).pipe(upstream);
      });
      for (const s of [conn, upstream]) {
        sockets.add(s);
        s.on("error", () => undefined).on("close", () => sockets.delete(s));
      }
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const port = (proxy.address() as { port: number }).port;
      const viaProxy = await client({ ...base, proxyUrl: `http://127.0.0.1:${port}` });
      assert.equal(await whoAmI(viaProxy), "admin");
      await viaProxy.list(ConfigMaps, { namespace: ns });
      assert.ok(tunnels.length >= 1);
      assert.equal(tunnels[0], new URL(base.server).host);
      await viaProxy.transport.destroy();
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => proxy.close(r));
    }
  });
});
