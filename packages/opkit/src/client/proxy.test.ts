/**
 * Proxies: client-go's choice of proxy (proxy-url, HTTPS_PROXY, NO_PROXY, loopback), and requests that
 * really go through an HTTP CONNECT proxy to an HTTPS server whose name only the proxy resolves.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { createCertificateAuthority, type CertificateAuthority, type KeyPairPem } from "../pki/index.ts";
import { noProxyMatches, proxyFor } from "./proxy.ts";
import { Transport } from "./transport.ts";
import { fakeApiServer, type FakeServer } from "./testdata/fake-apiserver.ts";

describe("proxyFor", () => {
  const https = new URL("https://api.prod.example:6443");
  it("prefers the cluster's proxy-url over the environment", () => {
    assert.equal(proxyFor(https, "socks5://p:1080", { HTTPS_PROXY: "http://env:3128" }), "socks5://p:1080");
  });
  it("uses HTTPS_PROXY for https servers and HTTP_PROXY for http ones, upper case first", () => {
    const env = {
      HTTPS_PROXY: "http://upper:1",
      https_proxy: "http://lower:1",
      http_proxy: "http://plain:1",
    };
    assert.equal(proxyFor(https, undefined, env), "http://upper:1");
    assert.equal(proxyFor(https, undefined, { https_proxy: "http://lower:1" }), "http://lower:1");
    assert.equal(proxyFor(new URL("http://api.example:8080"), undefined, env), "http://plain:1");
    assert.equal(proxyFor(https, undefined, {}), undefined);
  });
  it("reads a proxy without a scheme as http", () => {
    assert.equal(proxyFor(https, undefined, { HTTPS_PROXY: "proxy:3128" }), "http://proxy:3128");
  });
  it("never proxies localhost or loopback addresses", () => {
    const env = { HTTPS_PROXY: "http://p:1" };
    for (const host of ["localhost", "127.0.0.1", "127.1.2.3", "[::1]"]) {
      assert.equal(proxyFor(new URL(`https://${host}:6443`), undefined, env), undefined, host);
    }
  });
  it("honours NO_PROXY (upper case first)", () => {
    const env = { HTTPS_PROXY: "http://p:1", NO_PROXY: ".example", no_proxy: "" };
    assert.equal(proxyFor(https, undefined, env), undefined);
  });
});

describe("noProxyMatches (Go's NO_PROXY rules)", () => {
  const cases: [string, string, string, boolean][] = [
    ["*", "anything.example", "443", true],
    ["example.com", "example.com", "443", true],
    ["example.com", "api.example.com", "443", true],
    ["example.com", "notexample.com", "443", false],
    [".example.com", "example.com", "443", false],
    [".example.com", "api.example.com", "443", true],
    ["*.example.com", "api.example.com", "443", true],
    ["example.com:6443", "example.com", "6443", true],
    ["example.com:6443", "example.com", "443", false],
    ["10.0.0.0/8", "10.96.0.1", "443", true],
    ["10.0.0.0/8", "11.0.0.1", "443", false],
    ["fd00::/8", "fd00::1", "443", true],
    ["10.96.0.1", "10.96.0.1", "443", true],
    ["[fd00::1]:443", "fd00::1", "443", true],
    [" foo.com , EXAMPLE.com ", "api.example.com", "443", true],
    ["", "example.com", "443", false],
    ["10.0.0.0/99", "10.0.0.1", "443", false],
  ];
  for (const [noProxy, host, port, want] of cases) {
    it(`${JSON.stringify(noProxy)} ${want ? "exempts" : "does not exempt"} ${host}:${port}`, () => {
      assert.equal(noProxyMatches(noProxy, host, port), want);
    });
  }
});

/** An HTTP CONNECT proxy that sends every tunnel to 127.0.0.1 at the requested port. */
async function connectProxy(): Promise<{
  port: number;
  tunnels: { target: string; auth?: string }[];
  close: () => Promise<void>;
}> {
  const tunnels: { target: string; auth?: string }[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((_req, res) => res.writeHead(405).end());
  server.on("connect", (req, client: Socket, head: Buffer) => {
    tunnels.push({ target: req.url ?? "", auth: req.headers["proxy-authorization"] });
    const port = Number((req.url ?? "").split(":").pop());
    const upstream = connect(port, "127.0.0.1", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => undefined).on("close", () => sockets.delete(s));
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    tunnels,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe("Transport through a proxy", () => {
  let ca: CertificateAuthority;
  let serving: KeyPairPem;
  let srv: FakeServer;
  let proxy: Awaited<ReturnType<typeof connectProxy>>;
  before(async () => {
    ca = await createCertificateAuthority("opkit-proxy-test-ca");
    // Only the proxy knows where kube.test is: a direct connection could not even resolve it.
    serving = await ca.issue({ commonName: "kube.test", hosts: ["kube.test"], usage: "server" });
    srv = await fakeApiServer(() => ({ status: 200, body: { ok: true } }), {
      tls: { cert: serving.certPem, key: serving.keyPem },
    });
    proxy = await connectProxy();
  });
  after(async () => {
    await srv?.close();
    await proxy?.close();
  });

  it("tunnels through the cluster's proxy-url, with the proxy's credentials from the URL", async () => {
    const t = await Transport.create({
      server: `https://kube.test:${srv.port}`,
      certificateAuthority: { data: ca.certPem },
      proxyUrl: `http://opkit:s3cret@127.0.0.1:${proxy.port}`,
      token: "t",
    });
    try {
      const before = proxy.tunnels.length;
      assert.deepEqual(await t.request({ method: "GET", path: "/a" }), { ok: true });
      for (let i = 0; i < 5; i++) await t.request({ method: "GET", path: `/b${i}` });
      // Kept alive: not a tunnel per request. (undici's ProxyAgent opens a second tunnel for the second
      // request while the first idles, then reuses; hence at most two.)
      assert.ok(
        proxy.tunnels.length - before <= 2,
        `${proxy.tunnels.length - before} tunnels for 6 requests`,
      );
      assert.deepEqual(proxy.tunnels.at(-1), {
        target: `kube.test:${srv.port}`,
        auth: `Basic ${Buffer.from("opkit:s3cret").toString("base64")}`,
      });
      assert.equal(srv.requests.at(-1)?.headers.authorization, "Bearer t", "the server still gets our token");
    } finally {
      await t.destroy();
    }
  });

  it("uses HTTPS_PROXY from the environment unless NO_PROXY exempts the server", async () => {
    const saved = { HTTPS_PROXY: process.env.HTTPS_PROXY, NO_PROXY: process.env.NO_PROXY };
    process.env.HTTPS_PROXY = `127.0.0.1:${proxy.port}`;
    try {
      delete process.env.NO_PROXY;
      const viaEnv = await Transport.create({
        server: `https://kube.test:${srv.port}`,
        certificateAuthority: { data: ca.certPem },
      });
      try {
        const before = proxy.tunnels.length;
        await viaEnv.request({ method: "GET", path: "/c" });
        assert.equal(viaEnv.proxy, `http://127.0.0.1:${proxy.port}`);
        assert.equal(proxy.tunnels.length - before, 1);
      } finally {
        await viaEnv.destroy();
      }
      process.env.NO_PROXY = "svc,.test";
      const exempt = await Transport.create({ server: `https://kube.test:${srv.port}` });
      assert.equal(exempt.proxy, undefined);
      await exempt.destroy();
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
