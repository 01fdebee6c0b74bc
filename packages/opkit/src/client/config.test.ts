/**
 * Kubeconfig and in-cluster loading without @kubernetes/client-node: the fields read, relative paths,
 * $KUBECONFIG merging, contexts, the in-cluster service account, the loading order, and the errors for
 * files a user got wrong.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { configFromClientNode, inClusterConfig, loadClusterConfig } from "./config.ts";
import { KubeconfigError } from "./errors.ts";

const b64 = (s: string): string => Buffer.from(s).toString("base64");

describe("loadClusterConfig", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "opkit-kubeconfig-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const write = async (name: string, text: string): Promise<string> => {
    const path = join(dir, name);
    await mkdir(join(path, ".."), { recursive: true });
    await writeFile(path, text);
    return path;
  };

  it("reads inline data, the context's namespace, proxy-url, tls-server-name and impersonation", async () => {
    const path = await write(
      "inline.yaml",
      `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: ${b64("CA PEM")}
    tls-server-name: kubernetes.default
    proxy-url: http://proxy.example:3128
users:
- name: admin
  user:
    client-certificate-data: ${b64("CERT PEM")}
    client-key-data: ${b64("KEY PEM")}
    as: jane
    as-groups: [devs, ops]
    as-user-extra:
      scopes: [view]
contexts:
- name: prod
  context: { cluster: prod, user: admin, namespace: shop }
current-context: prod
`,
    );
    const c = await loadClusterConfig({ kubeconfig: path });
    assert.equal(c.server, "https://10.0.0.1:6443", "a trailing slash is dropped");
    assert.deepEqual(c.certificateAuthority, { data: Buffer.from("CA PEM") });
    assert.deepEqual(c.clientCertificate, { data: Buffer.from("CERT PEM") });
    assert.deepEqual(c.clientKey, { data: Buffer.from("KEY PEM") });
    assert.equal(c.tlsServerName, "kubernetes.default");
    assert.equal(c.proxyUrl, "http://proxy.example:3128");
    assert.equal(c.namespace, "shop");
    assert.deepEqual(c.impersonate, {
      user: "jane",
      uid: undefined,
      groups: ["devs", "ops"],
      extra: { scopes: ["view"] },
    });
    assert.match(c.source ?? "", /inline\.yaml, context "prod"/);
  });

  it("resolves file references against the kubeconfig's directory; tokenFile and exec too", async () => {
    const path = await write(
      "nested/files.yaml",
      `clusters:
- name: c
  cluster: { server: "https://k:6443", certificate-authority: ca.crt, insecure-skip-tls-verify: false }
users:
- name: u
  user:
    client-certificate: certs/u.crt
    client-key: /abs/u.key
    tokenFile: ./token
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/get-token
      args: [--cluster, c]
      env: [{ name: REGION, value: eu }]
      interactiveMode: Never
      provideClusterInfo: true
contexts:
- name: x
  context: { cluster: c, user: u }
current-context: x
`,
    );
    const c = await loadClusterConfig({ kubeconfig: path });
    const base = join(dir, "nested");
    assert.deepEqual(c.certificateAuthority, { file: join(base, "ca.crt") });
    assert.deepEqual(c.clientCertificate, { file: join(base, "certs/u.crt") });
    assert.deepEqual(c.clientKey, { file: "/abs/u.key" });
    assert.equal(c.tokenFile, join(base, "token"));
    assert.equal(c.insecureSkipTLSVerify, false);
    assert.equal(c.exec?.command, join(base, "bin/get-token"));
    assert.deepEqual(c.exec?.args, ["--cluster", "c"]);
    assert.deepEqual(c.exec?.env, [{ name: "REGION", value: "eu" }]);
    assert.equal(c.exec?.provideClusterInfo, true);
  });

  it("reads values as YAML 1.2 core: a date or a yes stays a string, as in the file", async () => {
    const path = await write(
      "core.yaml",
      `clusters:
- name: c
  cluster: { server: "https://k:6443" }
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: get-token
      args: [--since, 2026-01-01T00:00:00Z, --verbose, yes]
      env: [{ name: EXPIRES, value: 2026-01-01 }]
contexts:
- name: x
  context: { cluster: c, user: u }
current-context: x
`,
    );
    const c = await loadClusterConfig({ kubeconfig: path });
    assert.deepEqual(c.exec?.args, ["--since", "2026-01-01T00:00:00Z", "--verbose", "yes"]);
    assert.deepEqual(c.exec?.env, [{ name: "EXPIRES", value: "2026-01-01" }]);
  });

  it("an empty or comments-only file is an empty kubeconfig while merging; two documents are an error", async () => {
    const good = await write(
      "good.yaml",
      `clusters: [{ name: c, cluster: { server: "https://k:6443" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
    );
    const comments = await write("comments.yaml", "# placeholder, filled in later\n");
    const empty = await write("empty.yaml", "");
    const c = await loadClusterConfig({}, { env: { KUBECONFIG: [comments, empty, good].join(delimiter) } });
    assert.equal(c.server, "https://k:6443");
    const two = await write("two.yaml", "clusters: []\n---\nclusters: []\n");
    await assert.rejects(loadClusterConfig({ kubeconfig: two }), /two\.yaml is not valid YAML: 2 documents/);
  });

  it("merges $KUBECONFIG files: the first to define a name or current-context wins; missing files are skipped", async () => {
    const a = await write(
      "a.yaml",
      `clusters: [{ name: shared, cluster: { server: "https://first:6443" } }]
users: [{ name: u, user: { token: from-a } }]
contexts: [{ name: one, context: { cluster: shared, user: u } }]
current-context: one
`,
    );
    const b = await write(
      "b.yaml",
      `clusters:
- { name: shared, cluster: { server: "https://second:6443" } }
- { name: other, cluster: { server: "https://other:6443" } }
users: [{ name: u, user: { token: from-b } }]
contexts: [{ name: two, context: { cluster: other, user: u, namespace: n2 } }]
current-context: two
`,
    );
    const env = { KUBECONFIG: [join(dir, "missing.yaml"), a, b].join(delimiter) };
    const one = await loadClusterConfig({}, { env });
    assert.equal(one.server, "https://first:6443");
    assert.equal(one.token, "from-a");
    const two = await loadClusterConfig({ context: "two" }, { env });
    assert.equal(two.server, "https://other:6443");
    assert.equal(two.namespace, "n2");
    await assert.rejects(loadClusterConfig({ context: "three" }, { env }), (e: unknown) => {
      assert.ok(e instanceof KubeconfigError);
      assert.match(e.message, /no context "three" \(contexts: one, two\)/);
      return true;
    });
  });

  it("falls back to ~/.kube/config, then to the in-cluster service account", async () => {
    const home = join(dir, "home");
    await write(
      "home/.kube/config",
      `clusters: [{ name: c, cluster: { server: "https://home:6443" } }]
contexts: [{ name: x, context: { cluster: c } }]
current-context: x
`,
    );
    assert.equal((await loadClusterConfig({}, { env: {}, home })).server, "https://home:6443");

    const root = join(dir, "pod");
    await write("pod/var/run/secrets/kubernetes.io/serviceaccount/token", "sa-token");
    await write("pod/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "CA");
    await write("pod/var/run/secrets/kubernetes.io/serviceaccount/namespace", "operators\n");
    const env = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    const inCluster = await loadClusterConfig({}, { env, home: join(dir, "nohome"), root });
    assert.deepEqual(inCluster, {
      server: "https://10.96.0.1:443",
      certificateAuthority: { file: join(root, "var/run/secrets/kubernetes.io/serviceaccount/ca.crt") },
      tokenFile: join(root, "var/run/secrets/kubernetes.io/serviceaccount/token"),
      namespace: "operators",
      source: "in-cluster service account",
    });
    await assert.rejects(
      loadClusterConfig({}, { env: {}, home: join(dir, "nohome") }),
      /no Kubernetes cluster configured: pass a kubeconfig path, set KUBECONFIG/,
    );
  });

  it("in-cluster: brackets an IPv6 service host, and says what to do when the token is not mounted", async () => {
    const root = join(dir, "pod6");
    await write("pod6/var/run/secrets/kubernetes.io/serviceaccount/token", "t");
    const c = inClusterConfig({
      env: { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" },
      root,
    });
    assert.equal(c.server, "https://[fd00::1]:443");
    assert.equal(c.certificateAuthority, undefined);
    assert.throws(
      () =>
        inClusterConfig({
          env: { KUBERNETES_SERVICE_HOST: "h", KUBERNETES_SERVICE_PORT: "1" },
          root: join(dir, "none"),
        }),
      /token does not exist: mount the service account token/,
    );
  });

  it("names the file and field of what is wrong", async () => {
    const cases: [string, string, RegExp][] = [
      ["yaml.yaml", "clusters: [", /yaml\.yaml is not valid YAML/],
      ["list.yaml", "clusters: {a: 1}", /clusters must be a list/],
      ["noctx.yaml", "clusters: []", /has no current-context/],
      [
        "server.yaml",
        `clusters: [{ name: c, cluster: { server: 6443 } }]
contexts: [{ name: x, context: { cluster: c } }]
current-context: x`,
        /clusters\["c"\]\.cluster\.server must be a string/,
      ],
      [
        "scheme.yaml",
        `clusters: [{ name: c, cluster: { server: "ftp://x" } }]
contexts: [{ name: x, context: { cluster: c } }]
current-context: x`,
        /must be an http or https URL/,
      ],
      [
        "pair.yaml",
        `clusters: [{ name: c, cluster: { server: "https://x" } }]
users: [{ name: u, user: { client-certificate: a.crt } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x`,
        /client-certificate and client-key go together/,
      ],
      [
        "user.yaml",
        `clusters: [{ name: c, cluster: { server: "https://x" } }]
contexts: [{ name: x, context: { cluster: c, user: ghost } }]
current-context: x`,
        /names user "ghost", which is not defined/,
      ],
      [
        "exec.yaml",
        `clusters: [{ name: c, cluster: { server: "https://x" } }]
users: [{ name: u, user: { exec: { command: aws, apiVersion: client.authentication.k8s.io/v1alpha1 } } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x`,
        /exec\.apiVersion "client\.authentication\.k8s\.io\/v1alpha1" is not supported/,
      ],
      [
        "proxy.yaml",
        `clusters: [{ name: c, cluster: { server: "https://x", proxy-url: "ftp://p" } }]
contexts: [{ name: x, context: { cluster: c } }]
current-context: x`,
        /proxy-url "ftp:\/\/p" must use http, https or socks5/,
      ],
    ];
    for (const [name, text, message] of cases) {
      const path = await write(name, text);
      await assert.rejects(loadClusterConfig({ kubeconfig: path }), (e: unknown) => {
        assert.ok(e instanceof KubeconfigError, `${name}: ${String(e)}`);
        assert.match(e.message, message, name);
        return true;
      });
    }
    await assert.rejects(
      loadClusterConfig({ kubeconfig: join(dir, "nope.yaml") }),
      /nope\.yaml does not exist/,
    );
  });
});

describe("configFromClientNode", () => {
  it("reads a client-node KubeConfig through exportConfig, impersonation included", () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: "https://k:6443", skipTLSVerify: true }],
      users: [{ name: "u", token: "tok", impersonateUser: "jane" }],
      contexts: [{ name: "x", cluster: "c", user: "u", namespace: "ns" }],
      currentContext: "x",
    });
    const c = configFromClientNode(kc);
    assert.equal(c.server, "https://k:6443");
    assert.equal(c.insecureSkipTLSVerify, true);
    assert.equal(c.token, "tok");
    assert.equal(c.impersonate?.user, "jane");
    assert.equal(c.namespace, "ns");
  });

  it("maps client-node's in-cluster token-file auth-provider to a rotating token file", () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: "https://k:443" }],
      users: [{ name: "u", authProvider: { name: "tokenFile", config: { tokenFile: "/var/run/t" } } }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const c = configFromClientNode(kc);
    assert.equal(c.tokenFile, "/var/run/t");
    assert.equal(c.authProvider, undefined);
  });
});
