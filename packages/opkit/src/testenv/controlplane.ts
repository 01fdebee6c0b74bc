/**
 * A real Kubernetes control plane on one machine: etcd, kube-apiserver (RBAC on, client-certificate
 * admin, service-account signing keys), kube-controller-manager, kube-scheduler and kwok (simulated
 * nodes and kubelets). Everything listens on free ports of 127.0.0.1; each environment has a name, a
 * directory of its own under the cache, and a state file recording every PID it started, so that `down`,
 * `restart` or a watchdog can act on exactly those processes from any other process.
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { KubeClient } from "../client/client.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { createCertificateAuthority, createSigningKey } from "../pki/index.ts";
import { buildControlPlane, type BuildProgress } from "./build.ts";
import { freePorts, isRunning, portInUse, startDetached, stopProcess, tailFile } from "./processes.ts";
import { kwokStages } from "./stages.ts";
import { KUBERNETES_VERSION, binDir, envsDir } from "./versions.ts";

export const COMPONENTS = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kwok",
] as const;
export type ComponentName = (typeof COMPONENTS)[number];

export interface ComponentState {
  pid: number;
  exe: string;
  args: string[];
  port: number;
  log: string;
}

export interface EnvState {
  name: string;
  dir: string;
  kubernetesVersion: string;
  createdAt: string;
  nodes: number;
  advertiseAddress: string;
  kubeconfig: string;
  server: string;
  ports: Record<ComponentName, number> & { etcdPeer: number };
  components: Partial<Record<ComponentName, ComponentState>>;
  /** PID of the process that owns this env (a test run); a watchdog stops the env when it dies. */
  ownerPid?: number;
}

export interface ComponentStatus {
  name: ComponentName;
  pid?: number;
  port: number;
  running: boolean;
  healthy: boolean;
  detail: string;
}

export interface UpOptions {
  nodes?: number;
  onProgress?: (message: string) => void;
  onBuildProgress?: (p: BuildProgress) => void;
  /** Milliseconds each component may take to become healthy (default 90 s). */
  healthTimeoutMs?: number;
}

export interface UpResult {
  alreadyRunning: boolean;
  kubeconfig: string;
  elapsedMs: number;
}

/** A component did not become healthy (or died); carries its log tail. */
export class ComponentError extends Error {
  readonly component: string;
  readonly logTail: string;
  constructor(component: string, problem: string, logFile: string) {
    const tail = tailFile(logFile, 25);
    const port = /address already in use|bind: address/.test(tail) ? " (a port it needs is in use)" : "";
    super(`${component} ${problem}${port}; last lines of ${logFile}:\n${tail}`);
    this.name = "ComponentError";
    this.component = component;
    this.logTail = tail;
  }
}

export class EnvNotRunningError extends Error {
  constructor(name: string) {
    super(
      `no opkit env named "${name}" is running: start one with \`opkit env up${name === "default" ? "" : ` --name ${name}`}\``,
    );
    this.name = "EnvNotRunningError";
  }
}

const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/;
const NODE_ANNOTATION = "kwok.x-k8s.io/node";
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class ControlPlane {
  readonly name: string;
  readonly dir: string;

  constructor(name = "default") {
    if (!NAME_RE.test(name)) {
      throw new Error(
        `invalid env name "${name}": use lowercase letters, digits and '-' (at most 40 characters)`,
      );
    }
    this.name = name;
    this.dir = join(envsDir(), name);
  }

  /** Names of the environments that have state on this machine. */
  static async list(): Promise<string[]> {
    try {
      return (await readdir(envsDir())).filter((n) => existsSync(join(envsDir(), n, "state.json")));
    } catch {
      return [];
    }
  }

  get kubeconfigPath(): string {
    return join(this.dir, "kubeconfig");
  }

  private get statePath(): string {
    return join(this.dir, "state.json");
  }

  async state(): Promise<EnvState | undefined> {
    try {
      return JSON.parse(await readFile(this.statePath, "utf8")) as EnvState;
    } catch {
      return undefined;
    }
  }

  private async requireState(): Promise<EnvState> {
    const s = await this.state();
    if (!s) throw new EnvNotRunningError(this.name);
    return s;
  }

  private async save(s: EnvState): Promise<void> {
    await writeFile(this.statePath, JSON.stringify(s, null, 2));
  }

  /** True when every component recorded in the state runs. */
  async isRunning(): Promise<boolean> {
    const s = await this.state();
    if (!s) return false;
    return COMPONENTS.every((c) => {
      const p = s.components[c];
      return p !== undefined && isRunning(p.pid, p.exe);
    });
  }

  /** Start the environment (building binaries first if needed). Idempotent. */
  async up(opts: UpOptions = {}): Promise<UpResult> {
    const started = Date.now();
    const say = opts.onProgress ?? (() => undefined);
    if (await this.isRunning()) {
      return { alreadyRunning: true, kubeconfig: this.kubeconfigPath, elapsedMs: 0 };
    }
    // A half-started or crashed env: stop what is left of it and start clean.
    if (await this.state()) await this.down();

    await buildControlPlane({ onProgress: opts.onBuildProgress });
    const nodes = opts.nodes ?? 3;
    if (!Number.isInteger(nodes) || nodes < 0 || nodes > 500) {
      throw new Error(`--nodes must be a whole number from 0 to 500, got ${nodes}`);
    }
    await rm(this.dir, { recursive: true, force: true });
    for (const d of ["pki", "logs", "etcd-data"]) await mkdir(join(this.dir, d), { recursive: true });

    const [etcd, etcdPeer, apiserver, kcm, scheduler, kwok] = (await freePorts(6)) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const state: EnvState = {
      name: this.name,
      dir: this.dir,
      kubernetesVersion: KUBERNETES_VERSION,
      createdAt: new Date().toISOString(),
      nodes,
      advertiseAddress: advertiseAddress(),
      kubeconfig: this.kubeconfigPath,
      server: `https://127.0.0.1:${apiserver}`,
      ports: {
        etcd,
        etcdPeer,
        "kube-apiserver": apiserver,
        "kube-controller-manager": kcm,
        "kube-scheduler": scheduler,
        kwok,
      },
      components: {},
    };
    await this.save(state);
    try {
      say("writing certificates");
      await this.writePki(state);
      await writeFile(join(this.dir, "kwok-stages.yaml"), kwokStages());
      for (const c of COMPONENTS) {
        const t = Date.now();
        say(`starting ${c}`);
        await this.launch(state, c, opts.healthTimeoutMs ?? 90_000);
        say(`${c} healthy (${((Date.now() - t) / 1000).toFixed(1)}s)`);
      }
      say(`creating ${nodes} nodes`);
      await this.createNodes(nodes, opts.healthTimeoutMs ?? 90_000);
      await this.waitForDefaultServiceAccount(opts.healthTimeoutMs ?? 90_000);
    } catch (err) {
      await this.down();
      throw err;
    }
    return { alreadyRunning: false, kubeconfig: this.kubeconfigPath, elapsedMs: Date.now() - started };
  }

  /** Stop every process this env started (by recorded PID) and remove its state. */
  async down(): Promise<void> {
    const s = await this.state();
    if (s) {
      for (const c of [...COMPONENTS].reverse()) {
        const p = s.components[c];
        if (p) await stopProcess(p);
      }
    }
    await rm(this.dir, { recursive: true, force: true });
  }

  async status(): Promise<ComponentStatus[]> {
    const s = await this.requireState();
    return Promise.all(
      COMPONENTS.map(async (c) => {
        const p = s.components[c];
        const running = p !== undefined && isRunning(p.pid, p.exe);
        const health = running ? await this.probe(s, c) : { ok: false, detail: "not running" };
        return { name: c, pid: p?.pid, port: s.ports[c], running, healthy: health.ok, detail: health.detail };
      }),
    );
  }

  /** Stop one component (fault injection). Its ports and data stay. */
  async stop(component: ComponentName): Promise<void> {
    const s = await this.requireState();
    const p = s.components[component];
    if (p) await stopProcess(p);
  }

  /** Start a stopped component again with the same arguments, ports and data; waits until healthy. */
  async start(component: ComponentName, healthTimeoutMs = 90_000): Promise<void> {
    const s = await this.requireState();
    const p = s.components[component];
    if (p && isRunning(p.pid, p.exe)) return;
    await this.launch(s, component, healthTimeoutMs);
  }

  async restart(component: ComponentName, healthTimeoutMs = 90_000): Promise<void> {
    await this.stop(component);
    await this.start(component, healthTimeoutMs);
  }

  /**
   * Compact etcd to its current revision and defragment, so that watches resuming from older resource
   * versions get 410 Gone. kube-apiserver's watch cache would keep serving recent history from memory for
   * a while; unless `restartApiserver` is false, it is restarted so the compaction is visible at once.
   */
  async compact(opts: { restartApiserver?: boolean } = {}): Promise<{ revision: number }> {
    const s = await this.requireState();
    const base = `http://127.0.0.1:${s.ports.etcd}`;
    const post = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
      const res = await request(base + path, { method: "POST", body: JSON.stringify(body) });
      const json = (await res.body.json()) as Record<string, unknown>;
      if (res.statusCode !== 200) throw new Error(`etcd ${path}: ${res.statusCode} ${JSON.stringify(json)}`);
      return json;
    };
    // A range over one key is the cheapest way to read the current revision from the response header.
    const status = (await post("/v3/kv/range", { key: Buffer.from("/").toString("base64"), limit: 1 })) as {
      header?: { revision?: string };
    };
    const revision = Number(status.header?.revision ?? 0);
    try {
      await post("/v3/kv/compaction", { revision: String(revision), physical: true });
    } catch (err) {
      // Nothing was written since the last compaction: already compacted to this revision.
      if (!String(err).includes("required revision has been compacted")) throw err;
    }
    await post("/v3/maintenance/defragment", {});
    if (opts.restartApiserver ?? true) await this.restart("kube-apiserver");
    return { revision };
  }

  /** A client for this env as the admin user. */
  async client(options: { fieldManager?: string } = {}): Promise<KubeClient> {
    await this.requireState();
    return KubeClient.load({ ...options, kubeconfig: this.kubeconfigPath });
  }

  logFile(component: ComponentName): string {
    return join(this.dir, "logs", `${component}.log`);
  }

  // ---- internals -------------------------------------------------------------------------------

  private async writePki(s: EnvState): Promise<void> {
    const pki = join(this.dir, "pki");
    const ca = await createCertificateAuthority(`opkit-env-${this.name}-ca`);
    const serving = await ca.issue({
      commonName: "kube-apiserver",
      usage: "server",
      hosts: [
        "127.0.0.1",
        s.advertiseAddress,
        "10.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
      ],
    });
    const sa = await createSigningKey();
    const files: Record<string, string> = {
      "ca.crt": ca.certPem,
      "ca.key": ca.keyPem,
      "apiserver.crt": serving.certPem,
      "apiserver.key": serving.keyPem,
      "sa.key": sa.privateKeyPem,
      "sa.pub": sa.publicKeyPem,
    };
    const users: Record<string, { cn: string; orgs: string[] }> = {
      admin: { cn: "admin", orgs: ["system:masters"] },
      "kube-controller-manager": { cn: "system:kube-controller-manager", orgs: [] },
      "kube-scheduler": { cn: "system:kube-scheduler", orgs: [] },
      kwok: { cn: "opkit:kwok", orgs: ["system:masters"] },
    };
    for (const [file, u] of Object.entries(users)) {
      const pair = await ca.issue({ commonName: u.cn, organizations: u.orgs, usage: "client" });
      const kubeconfig = kubeconfigYaml(
        `opkit-${this.name}`,
        s.server,
        ca.certPem,
        u.cn,
        pair.certPem,
        pair.keyPem,
      );
      await writeFile(
        file === "admin" ? this.kubeconfigPath : join(this.dir, `${file}.kubeconfig`),
        kubeconfig,
        { mode: 0o600 },
      );
    }
    for (const [f, content] of Object.entries(files)) {
      await writeFile(join(pki, f), content, { mode: f.endsWith(".key") ? 0o600 : 0o644 });
    }
  }

  private args(s: EnvState, c: ComponentName): string[] {
    const pki = (f: string): string => join(this.dir, "pki", f);
    const kc = (f: string): string => join(this.dir, `${f}.kubeconfig`);
    switch (c) {
      case "etcd":
        return [
          "--name=opkit",
          `--data-dir=${join(this.dir, "etcd-data")}`,
          `--listen-client-urls=http://127.0.0.1:${s.ports.etcd}`,
          `--advertise-client-urls=http://127.0.0.1:${s.ports.etcd}`,
          `--listen-peer-urls=http://127.0.0.1:${s.ports.etcdPeer}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${s.ports.etcdPeer}`,
          `--initial-cluster=opkit=http://127.0.0.1:${s.ports.etcdPeer}`,
          // Test data is disposable: skipping fsync makes etcd several times faster on small disks.
          "--unsafe-no-fsync=true",
          "--log-level=warn",
        ];
      case "kube-apiserver":
        return [
          `--etcd-servers=http://127.0.0.1:${s.ports.etcd}`,
          `--etcd-prefix=/registry`,
          `--secure-port=${s.ports["kube-apiserver"]}`,
          "--bind-address=127.0.0.1",
          `--advertise-address=${s.advertiseAddress}`,
          // No kubelets and no real network: do not maintain endpoints for the `kubernetes` Service.
          "--endpoint-reconciler-type=none",
          `--cert-dir=${join(this.dir, "pki")}`,
          `--tls-cert-file=${pki("apiserver.crt")}`,
          `--tls-private-key-file=${pki("apiserver.key")}`,
          `--client-ca-file=${pki("ca.crt")}`,
          "--authorization-mode=RBAC",
          "--service-cluster-ip-range=10.0.0.0/24",
          "--allow-privileged=true",
          "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
          `--service-account-key-file=${pki("sa.pub")}`,
          `--service-account-signing-key-file=${pki("sa.key")}`,
          "--profiling=false",
          "--v=1",
        ];
      case "kube-controller-manager":
        return [
          `--kubeconfig=${kc("kube-controller-manager")}`,
          `--authentication-kubeconfig=${kc("kube-controller-manager")}`,
          `--authorization-kubeconfig=${kc("kube-controller-manager")}`,
          `--secure-port=${s.ports["kube-controller-manager"]}`,
          "--bind-address=127.0.0.1",
          "--leader-elect=false",
          "--controllers=*",
          // Each controller acts with its own service account, as in a real cluster (RBAC matters).
          "--use-service-account-credentials=true",
          `--service-account-private-key-file=${pki("sa.key")}`,
          `--root-ca-file=${pki("ca.crt")}`,
          "--cluster-name=opkit",
          "--profiling=false",
          "--v=1",
        ];
      case "kube-scheduler":
        return [
          `--kubeconfig=${kc("kube-scheduler")}`,
          `--authentication-kubeconfig=${kc("kube-scheduler")}`,
          `--authorization-kubeconfig=${kc("kube-scheduler")}`,
          `--secure-port=${s.ports["kube-scheduler"]}`,
          "--bind-address=127.0.0.1",
          "--leader-elect=false",
          "--profiling=false",
          "--v=1",
        ];
      case "kwok":
        return [
          `--kubeconfig=${kc("kwok")}`,
          `--config=${join(this.dir, "kwok-stages.yaml")}`,
          `--manage-nodes-with-annotation-selector=${NODE_ANNOTATION}=fake`,
          `--server-address=127.0.0.1:${s.ports.kwok}`,
          "--cidr=10.244.0.0/16",
          "--node-ip=10.200.0.1",
          "--node-lease-duration-seconds=40",
          "--v=INFO",
        ];
    }
  }

  private async launch(s: EnvState, c: ComponentName, timeoutMs: number): Promise<void> {
    const port = s.ports[c];
    if (await portInUse(port)) {
      throw new Error(`${c} cannot start: port ${port} on 127.0.0.1 is in use by another process`);
    }
    const exe = join(binDir(), c);
    const args = this.args(s, c);
    const log = this.logFile(c);
    const p = startDetached(exe, args, log);
    s.components[c] = { pid: p.pid, exe, args, port, log };
    await this.save(s); // record the PID before waiting, so a failure or Ctrl-C can still stop it
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!isRunning(p.pid, exe)) throw new ComponentError(c, "exited during start", log);
      const h = await this.probe(s, c);
      if (h.ok) return;
      if (Date.now() > deadline) {
        throw new ComponentError(
          c,
          `did not become healthy within ${timeoutMs / 1000}s (last check: ${h.detail})`,
          log,
        );
      }
      await sleep(250);
    }
  }

  private async probe(s: EnvState, c: ComponentName): Promise<{ ok: boolean; detail: string }> {
    const port = s.ports[c];
    try {
      if (c === "etcd")
        return await httpProbe(`http://127.0.0.1:${port}/health`, undefined, (b) =>
          b.includes('"health":"true"'),
        );
      if (c === "kwok") return await httpProbe(`http://127.0.0.1:${port}/healthz`, undefined);
      if (c === "kube-apiserver") {
        const pki = join(this.dir, "pki");
        const kcText = await readFile(this.kubeconfigPath, "utf8");
        const cert = /client-certificate-data: (\S+)/.exec(kcText)?.[1] ?? "";
        const key = /client-key-data: (\S+)/.exec(kcText)?.[1] ?? "";
        const agent = new Agent({
          connect: {
            ca: await readFile(join(pki, "ca.crt")),
            cert: Buffer.from(cert, "base64"),
            key: Buffer.from(key, "base64"),
          },
        });
        try {
          return await httpProbe(`https://127.0.0.1:${port}/readyz`, agent);
        } finally {
          await agent.close();
        }
      }
      // controller-manager and scheduler serve health on a self-signed certificate of their own.
      const agent = new Agent({ connect: { rejectUnauthorized: false } });
      try {
        return await httpProbe(`https://127.0.0.1:${port}/healthz`, agent);
      } finally {
        await agent.close();
      }
    } catch (err) {
      return { ok: false, detail: err instanceof Error ? err.message : String(err) };
    }
  }

  private async createNodes(count: number, timeoutMs: number): Promise<void> {
    const client = await this.client();
    try {
      const Nodes = kindRef<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
        "v1",
        "Node",
      );
      for (let i = 0; i < count; i++) {
        const name = `opkit-node-${i}`;
        const resources = { cpu: "32", memory: "128Gi", pods: "110" };
        await client.create({
          apiVersion: "v1",
          kind: "Node",
          metadata: {
            name,
            annotations: { [NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
            labels: {
              "kubernetes.io/hostname": name,
              "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64",
              "node-role.kubernetes.io/worker": "",
              type: "kwok",
            },
          },
          status: { allocatable: resources, capacity: resources },
        } as KubeObject);
      }
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const list = await client.list(Nodes);
        const ready = list.items.filter((n) =>
          n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
        );
        if (ready.length >= count) return;
        if (Date.now() > deadline) {
          throw new ComponentError(
            "kwok",
            `made ${ready.length} of ${count} nodes Ready within ${timeoutMs / 1000}s`,
            this.logFile("kwok"),
          );
        }
        await sleep(250);
      }
    } finally {
      await client.close();
    }
  }

  /** Pods cannot be created in a namespace until its `default` ServiceAccount exists. */
  private async waitForDefaultServiceAccount(timeoutMs: number): Promise<void> {
    const client = await this.client();
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        try {
          await client.get(kindRef("v1", "ServiceAccount"), "default", { namespace: "default" });
          return;
        } catch (err) {
          if (Date.now() > deadline) {
            throw new ComponentError(
              "kube-controller-manager",
              `did not create the default ServiceAccount (${String(err)})`,
              this.logFile("kube-controller-manager"),
            );
          }
          await sleep(250);
        }
      }
    } finally {
      await client.close();
    }
  }
}

async function httpProbe(
  url: string,
  dispatcher: Agent | undefined,
  accept: (body: string) => boolean = () => true,
): Promise<{ ok: boolean; detail: string }> {
  const res = await request(url, { dispatcher, headersTimeout: 2_000, bodyTimeout: 2_000 });
  const body = await res.body.text();
  const ok = res.statusCode === 200 && accept(body);
  return { ok, detail: ok ? "ok" : `${res.statusCode} ${body.slice(0, 200).replace(/\s+/g, " ")}` };
}

/**
 * kube-apiserver refuses a loopback advertise address; any non-loopback IPv4 address of the machine
 * will do since nothing connects to it. `OPKIT_ADVERTISE_ADDRESS` overrides.
 */
function advertiseAddress(): string {
  if (process.env.OPKIT_ADVERTISE_ADDRESS) return process.env.OPKIT_ADVERTISE_ADDRESS;
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  }
  throw new Error(
    "kube-apiserver needs a non-loopback IPv4 address for --advertise-address and this machine has none: " +
      "set OPKIT_ADVERTISE_ADDRESS to any address (e.g. 10.0.0.10)",
  );
}

function kubeconfigYaml(
  name: string,
  server: string,
  caPem: string,
  user: string,
  certPem: string,
  keyPem: string,
): string {
  const b64 = (s: string): string => Buffer.from(s).toString("base64");
  return `apiVersion: v1
kind: Config
clusters:
- name: ${name}
  cluster:
    server: ${server}
    certificate-authority-data: ${b64(caPem)}
users:
- name: ${user}
  user:
    client-certificate-data: ${b64(certPem)}
    client-key-data: ${b64(keyPem)}
contexts:
- name: ${name}
  context:
    cluster: ${name}
    user: ${user}
current-context: ${name}
`;
}
