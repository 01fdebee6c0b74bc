/**
 * A real Kubernetes control plane on one machine: etcd, kube-apiserver (RBAC on, client-certificate
 * admin, service-account signing keys), kube-controller-manager, kube-scheduler, kwok (simulated nodes
 * and kubelets) and a local volume provisioner. Everything listens on free ports of 127.0.0.1; each
 * environment has a name, a directory of its own under the cache, and a state file recording every PID
 * it started, so that `down`, `restart` or a watchdog can act on exactly those processes from any other
 * process.
 *
 * ControlPlane only orchestrates: the state file is state.ts, settings and their validation
 * settings.ts, certificates certs.ts, each component's flags flags.ts, starting and probing launch.ts,
 * nodes nodes.ts, storage storage.ts and etcd maintenance etcd.ts.
 */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { realClock, type Clock } from "../clock/index.ts";
import { KubeClient } from "../client/client.ts";
import { AlreadyExistsError, NotFoundError } from "../client/errors.ts";
import { Nodes, Pods, ServiceAccounts, type Node } from "../client/builtins.ts";
import { buildControlPlane, type BuildProgress } from "./build.ts";
import { firstAddress, writeEnvCertificates } from "./certs.ts";
import { compactEtcd, readEtcdPrefix, type StoredEntry } from "./etcd.ts";
import { eventually } from "./eventually.ts";
import { fitToVersion } from "./capabilities.ts";
import { allComponentArgs, kwokConfigPath } from "./flags.ts";
import { ComponentError, launchComponent, probeComponent } from "./launch.ts";
import { createNodes, defaultNodeSpecs, type NodeSpec } from "./nodes.ts";
import { freePorts, isRunning, stopProcess } from "./processes.ts";
import { advertiseAddress, resolveSettings, settingsDiff, type EnvOptions } from "./settings.ts";
import { kwokConfiguration } from "./stages.ts";
import { COMPONENTS, EnvFiles, type ComponentName, type ComponentState, type EnvState } from "./state.ts";
import { storageObjects } from "./storage.ts";

export {
  COMPONENTS,
  EnvNotRunningError,
  type ComponentName,
  type ComponentState,
  type EnvState,
} from "./state.ts";
export { ComponentError } from "./launch.ts";

/** One component's row in `status()`. */
export interface ComponentStatus {
  /** The component. */
  name: ComponentName;
  /** Its process id, when it was started. */
  pid?: number;
  /** The port it serves on. */
  port: number;
  /** Whether its process is alive. */
  running: boolean;
  /** Whether its health endpoint answers ok. */
  healthy: boolean;
  /** Why it is not healthy, or "ok". */
  detail: string;
}

/** Options of `up`: the env's shape (EnvOptions) plus progress callbacks and the health timeout. */
export interface UpOptions extends EnvOptions {
  /** Told about each start-up step, e.g. to print progress. */
  onProgress?: (message: string) => void;
  /** Told about the build of missing binaries, when `up` has to build first. */
  onBuildProgress?: (p: BuildProgress) => void;
  /** Milliseconds each component may take to become healthy (default 90 s). */
  healthTimeoutMs?: number;
}

/** What `up` did. */
export interface UpResult {
  /** True when the env was running already and `up` only checked it. */
  alreadyRunning: boolean;
  /** Path of the admin kubeconfig of the env. */
  kubeconfig: string;
  /** The Kubernetes release the env runs. */
  kubernetesVersion: string;
  /** How long `up` took. */
  elapsedMs: number;
  /** The requested feature gates and flags the release lacks, left out (one line each). */
  notes: string[];
  /**
   * When the env was already running: the requested settings it does not have (`up` never changes a
   * running env; `down` first to change them). Empty otherwise.
   */
  differences: string[];
}

const DEFAULT_HEALTH_TIMEOUT_MS = 90_000;

/** A named local control plane: start, stop, inspect and fault-inject it. */
export class ControlPlane {
  /** The env's name. */
  readonly name: string;
  /** The directory holding its state, certificates, data and logs. */
  readonly dir: string;
  private readonly files: EnvFiles;
  private readonly clock: Clock;

  /**
   * @param name the env's name (lowercase letters, digits, '-'); several envs run side by side.
   * @param options.clock the clock for every wait (start-up, health, nodes); the real one by default.
   */
  constructor(name = "default", options: { clock?: Clock } = {}) {
    this.files = new EnvFiles(name);
    this.name = name;
    this.dir = this.files.dir;
    this.clock = options.clock ?? realClock;
  }

  /** Names of the environments that have state on this machine. */
  static list(): Promise<string[]> {
    return EnvFiles.list();
  }

  /** Path of the env's admin kubeconfig (exists once `up` has run). */
  get kubeconfigPath(): string {
    return this.files.kubeconfigPath;
  }

  /** The env's recorded state, or undefined when it has none. */
  state(): Promise<EnvState | undefined> {
    return this.files.read();
  }

  /** True when every component recorded in the state runs. */
  async isRunning(): Promise<boolean> {
    const s = await this.state();
    if (!s) return false;
    return COMPONENTS.every((c) => {
      const p = s.components[c];
      return p !== undefined && isRunning(p.pid, p.exe, p.args);
    });
  }

  /**
   * Start the environment (building binaries first if needed). Idempotent: on a running env it changes
   * nothing and reports the requested settings the env does not have in `differences`.
   */
  async up(opts: UpOptions = {}): Promise<UpResult> {
    // Long on purpose: the start-up steps in their order (build, certificates, each component, nodes); the order is the logic.
    const clock = this.clock;
    const started = clock.now();
    const say = opts.onProgress ?? (() => undefined);
    const healthTimeoutMs = opts.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
    // Validate before touching anything: bad input must not stop a running env.
    const requested = resolveSettings(opts);
    const version = requested.kubernetesVersion;
    if (await this.isRunning()) {
      const s = await this.files.require();
      // Compare with what the running release would have made of the request (gates it lacks left out).
      const fit = await fitToVersion(s.kubernetesVersion, requested.settings.featureGates, () => []).catch(
        () => undefined,
      );
      const asRunning = fit
        ? { ...requested, settings: { ...requested.settings, featureGates: fit.featureGates } }
        : requested;
      return {
        alreadyRunning: true,
        kubeconfig: this.kubeconfigPath,
        kubernetesVersion: s.kubernetesVersion,
        elapsedMs: 0,
        differences: settingsDiff(
          { nodes: s.nodes, kubernetesVersion: s.kubernetesVersion, settings: s.settings },
          version === s.kubernetesVersion ? asRunning : requested,
        ),
        notes: s.notes ?? [],
      };
    }
    // A half-started or crashed env: stop what is left of it and start clean.
    if (await this.state()) await this.down();

    await buildControlPlane({ kubernetesVersion: version, onProgress: opts.onBuildProgress });
    await rm(this.dir, { recursive: true, force: true });
    for (const d of ["pki", "logs", "etcd-data", "volumes"])
      await mkdir(join(this.dir, d), { recursive: true });

    const [etcd, etcdPeer, apiserver, kcm, scheduler, kwok, provisioner] = (await freePorts(7)) as [
      number,
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
      kubernetesVersion: version,
      createdAt: new Date().toISOString(),
      nodes: requested.nodes,
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
        "local-provisioner": provisioner,
      },
      components: {},
      settings: requested.settings,
    };
    // Gates and flags the release lacks are left out, with a note (a gate no release knows is an error).
    const fit = await fitToVersion(version, requested.settings.featureGates, (c) =>
      allComponentArgs({ ...state, settings: { ...state.settings, featureGates: {} } }, c),
    ).catch(async (err: unknown) => {
      await rm(this.dir, { recursive: true, force: true });
      throw err;
    });
    state.settings = { ...state.settings, featureGates: fit.featureGates };
    if (Object.keys(fit.omittedFlags).length > 0) state.omittedFlags = fit.omittedFlags;
    if (fit.notes.length > 0) state.notes = fit.notes;
    for (const n of fit.notes) say(`note: ${n}`);
    await this.files.write(state);
    try {
      say("writing certificates");
      await writeEnvCertificates({
        name: this.name,
        dir: this.dir,
        server: state.server,
        advertiseAddress: state.advertiseAddress,
        kubernetesServiceIP: firstAddress(state.settings.serviceClusterIPRange),
      });
      await writeFile(kwokConfigPath(this.dir), kwokConfiguration());
      for (const c of COMPONENTS) {
        const t = clock.now();
        // The provisioner's RBAC and the default StorageClass must exist before it starts.
        if (c === "local-provisioner") await this.installStorage();
        say(`starting ${c}`);
        await launchComponent(this.files, state, c, healthTimeoutMs, clock);
        say(`${c} healthy (${((clock.now() - t) / 1000).toFixed(1)}s)`);
      }
      say(`creating ${requested.nodes} nodes`);
      await this.withClient((client) =>
        createNodes(client, defaultNodeSpecs(requested.nodes), state.settings.nodeCapacity, {
          timeoutMs: healthTimeoutMs,
          kwokLog: this.logFile("kwok"),
          clock,
        }),
      );
      await this.waitForDefaultServiceAccount(healthTimeoutMs);
    } catch (err) {
      await this.down();
      throw err;
    }
    return {
      alreadyRunning: false,
      kubeconfig: this.kubeconfigPath,
      kubernetesVersion: version,
      elapsedMs: clock.now() - started,
      differences: [],
      notes: fit.notes,
    };
  }

  /** Stop every process this env started (by recorded PID) and remove its state. */
  async down(): Promise<void> {
    const s = await this.state();
    if (s) {
      for (const c of [...COMPONENTS].reverse()) {
        const p = s.components[c];
        if (p) await stopProcess(p, undefined, this.clock);
      }
    }
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Each component: PID, port, whether it runs and whether its health endpoint answers. */
  async status(): Promise<ComponentStatus[]> {
    const s = await this.files.require();
    return Promise.all(
      COMPONENTS.map(async (c) => {
        const p = s.components[c];
        const running = p !== undefined && isRunning(p.pid, p.exe, p.args);
        const health = running ? await probeComponent(s, c) : { ok: false, detail: "not running" };
        return { name: c, pid: p?.pid, port: s.ports[c], running, healthy: health.ok, detail: health.detail };
      }),
    );
  }

  /** Stop one component (fault injection). Its ports and data stay. */
  async stop(component: ComponentName): Promise<void> {
    const s = await this.files.require();
    const p = s.components[component];
    if (p) await stopProcess(p, undefined, this.clock);
  }

  /** Start a stopped component again with the same arguments, ports and data; waits until healthy. */
  async start(component: ComponentName, healthTimeoutMs = DEFAULT_HEALTH_TIMEOUT_MS): Promise<void> {
    const s = await this.files.require();
    const p: ComponentState | undefined = s.components[component];
    if (p && isRunning(p.pid, p.exe, p.args)) return;
    await launchComponent(this.files, s, component, healthTimeoutMs, this.clock);
  }

  /** Stop and start one component. */
  async restart(component: ComponentName, healthTimeoutMs = DEFAULT_HEALTH_TIMEOUT_MS): Promise<void> {
    await this.stop(component);
    await this.start(component, healthTimeoutMs);
  }

  /**
   * Add simulated nodes of any size, labels and taints (custom schedulers, taints and tolerations, bin
   * packing) and wait until kwok reports them Ready. Capacity not given comes from the env's node size.
   * Remove them with `removeNodes` (or let `down` take them with the env).
   */
  async addNodes(specs: NodeSpec[], opts: { timeoutMs?: number } = {}): Promise<Node[]> {
    const s = await this.files.require();
    return this.withClient((client) =>
      createNodes(client, specs, s.settings.nodeCapacity, {
        timeoutMs: opts.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS,
        kwokLog: this.logFile("kwok"),
        clock: this.clock,
      }),
    );
  }

  /**
   * Delete nodes by name (missing ones are ignored). Their pods are deleted at once, as a drained
   * node's would be: with the node gone, no simulated kubelet would finish deleting them.
   */
  async removeNodes(names: string[]): Promise<void> {
    await this.withClient(async (client) => {
      for (const n of names) {
        const pods = await client.listAll(Pods, { fieldSelector: `spec.nodeName=${n}` });
        for (const p of pods.items) {
          try {
            await client.delete(Pods, p.metadata.name ?? "", {
              namespace: p.metadata.namespace,
              gracePeriodSeconds: 0,
            });
          } catch (err) {
            if (!(err instanceof NotFoundError)) throw err;
          }
        }
        try {
          await client.delete(Nodes, n);
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
        }
      }
    });
  }

  /**
   * Compact etcd to its current revision and defragment, so that watches resuming from older resource
   * versions get 410 Gone. kube-apiserver's watch cache would keep serving recent history from memory for
   * a while; unless `restartApiserver` is false, it is restarted so the compaction is visible at once.
   */
  async compact(opts: { restartApiserver?: boolean } = {}): Promise<{
    /** The etcd revision compacted to. */
    revision: number;
  }> {
    const s = await this.files.require();
    const { revision } = await compactEtcd(s.ports.etcd);
    if (opts.restartApiserver ?? true) await this.restart("kube-apiserver");
    return { revision };
  }

  /**
   * What etcd holds under `prefix` (e.g. `/registry/example.com/widgets/`), read straight from etcd: the
   * version a custom resource is really stored in is its value's `apiVersion`.
   */
  async stored(prefix: string): Promise<StoredEntry[]> {
    const s = await this.files.require();
    return readEtcdPrefix(s.ports.etcd, prefix);
  }

  /** A client for this env as the admin user. */
  async client(options: { fieldManager?: string } = {}): Promise<KubeClient> {
    await this.files.require();
    return KubeClient.load({ ...options, kubeconfig: this.kubeconfigPath });
  }

  /** The log file of a component (it exists once the component started). */
  logFile(component: ComponentName): string {
    return this.files.logFile(component);
  }

  // ---- internals -------------------------------------------------------------------------------

  private async withClient<T>(fn: (client: KubeClient) => Promise<T>): Promise<T> {
    const client = await KubeClient.load({ kubeconfig: this.kubeconfigPath, fieldManager: "opkit-env" });
    try {
      return await fn(client);
    } finally {
      await client.close();
    }
  }

  /** The default StorageClass and the provisioner's RBAC. */
  private async installStorage(): Promise<void> {
    await this.withClient(async (client) => {
      for (const o of storageObjects()) {
        try {
          await client.create(o);
        } catch (err) {
          if (!(err instanceof AlreadyExistsError)) throw err;
        }
      }
    });
  }

  /** Pods cannot be created in a namespace until its `default` ServiceAccount exists. */
  private async waitForDefaultServiceAccount(timeoutMs: number): Promise<void> {
    await this.withClient(async (client) => {
      try {
        await eventually(
          "the default ServiceAccount",
          () => client.get(ServiceAccounts, "default", { namespace: "default" }),
          timeoutMs,
          250,
          this.clock,
        );
      } catch (err) {
        throw new ComponentError(
          "kube-controller-manager",
          `did not create the default ServiceAccount (${err instanceof Error ? err.message : String(err)})`,
          this.logFile("kube-controller-manager"),
        );
      }
    });
  }
}
