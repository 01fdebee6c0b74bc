/**
 * An environment's state on disk: the directory of one env (`<cache>/envs/<name>/`), its state file
 * recording every port, PID and setting, and the typed errors about a missing env. The state file is
 * what lets `down`, `restart` or a watchdog in another process act on exactly the processes this env
 * started. It knows nothing of how components are configured or started.
 */
import { existsSync } from "node:fs";
import { readFile, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { envsDir } from "./versions.ts";

/** The processes of an env, in start order (stopped in reverse). */
export const COMPONENTS = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kwok",
  "local-provisioner",
] as const;
/** One of COMPONENTS. */
export type ComponentName = (typeof COMPONENTS)[number];

/** A started component as recorded in the state file. */
export interface ComponentState {
  /** Its process id. */
  pid: number;
  /** The executable, to recognise the process (a reused pid is not it). */
  exe: string;
  /** Its command-line arguments. */
  args: string[];
  /** The port it serves on. */
  port: number;
  /** Its log file. */
  log: string;
}

/** Resources of a simulated node: `cpu`, `memory`, `pods` and any extended resource, as quantities. */
export type NodeResources = Record<string, string>;

/** The settings an env was started with; restarts of a component reuse them. */
export interface EnvSettings {
  /** The Service IP range of kube-apiserver (`--service-cluster-ip-range`). */
  serviceClusterIPRange: string;
  /** Feature gates given to kube-apiserver, kube-controller-manager and kube-scheduler. */
  featureGates: Record<string, boolean>;
  /** API group/versions kube-apiserver serves or stops serving beyond its defaults (`--runtime-config`). */
  runtimeConfig?: Record<string, boolean>;
  /** Client rate limit of kube-controller-manager and kube-scheduler (`--kube-api-qps`, `--kube-api-burst`). */
  componentQps: number;
  /** Client burst of kube-controller-manager and kube-scheduler. */
  componentBurst: number;
  /** Capacity (and allocatable) of each node `up` creates, and the default for `addNodes`. */
  nodeCapacity: NodeResources;
}

/** What `<env dir>/state.json` holds. */
export interface EnvState {
  /** The env's name. */
  name: string;
  /** Its state directory. */
  dir: string;
  /** The Kubernetes version it runs. */
  kubernetesVersion: string;
  /** When it was created (ISO 8601). */
  createdAt: string;
  /** How many simulated nodes `up` created. */
  nodes: number;
  /** The address kube-apiserver advertises. */
  advertiseAddress: string;
  /** Path of the admin kubeconfig. */
  kubeconfig: string;
  /** The API server's URL. */
  server: string;
  /** The ports of every component (chosen free at creation). */
  ports: Record<ComponentName, number> & {
    /** etcd's peer port (not a component of its own). */
    etcdPeer: number;
  };
  /** The started components. */
  components: Partial<Record<ComponentName, ComponentState>>;
  /** The settings it was started with. */
  settings: EnvSettings;
  /**
   * Flags of a component that its Kubernetes release lacks, left out of its command line (names without
   * dashes); absent when none are.
   */
  omittedFlags?: Partial<Record<ComponentName, string[]>>;
  /** What was left out of the requested settings because the release lacks it, one line each. */
  notes?: string[];
  /** PID of the process that owns this env (a test run); a watchdog stops the env when it dies. */
  ownerPid?: number;
}

/** Raised by every operation that needs a running env when there is none of that name. */
export class EnvNotRunningError extends Error {
  constructor(name: string) {
    super(
      `no opkit env named "${name}" is running: start one with \`opkit env up${name === "default" ? "" : ` --name ${name}`}\``,
    );
    this.name = "EnvNotRunningError";
  }
}

/** An env name that cannot be used as a directory name and kubeconfig context. */
export class InvalidEnvNameError extends Error {
  constructor(name: string) {
    super(`invalid env name "${name}": use lowercase letters, digits and '-' (at most 40 characters)`);
    this.name = "InvalidEnvNameError";
  }
}

const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/;

/**
 * What an env started before settings were recorded ran with, so that restarting one of its components
 * keeps the flags it started with.
 */
const LEGACY_SETTINGS: EnvSettings = {
  serviceClusterIPRange: "10.0.0.0/24",
  featureGates: {},
  componentQps: 20,
  componentBurst: 30,
  nodeCapacity: { cpu: "32", memory: "128Gi", pods: "110" },
};

/** The files of one env. Reading a missing or unreadable state file yields `undefined`, never throws. */
export class EnvFiles {
  readonly name: string;
  readonly dir: string;

  constructor(name: string) {
    if (!NAME_RE.test(name)) throw new InvalidEnvNameError(name);
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

  get statePath(): string {
    return join(this.dir, "state.json");
  }

  /** The admin kubeconfig. */
  get kubeconfigPath(): string {
    return join(this.dir, "kubeconfig");
  }

  /** Where the local provisioner creates the directories of its volumes. */
  get volumesDir(): string {
    return join(this.dir, "volumes");
  }

  logFile(component: ComponentName): string {
    return join(this.dir, "logs", `${component}.log`);
  }

  async read(): Promise<EnvState | undefined> {
    try {
      const s = JSON.parse(await readFile(this.statePath, "utf8")) as EnvState;
      s.settings ??= LEGACY_SETTINGS;
      return s;
    } catch {
      return undefined;
    }
  }

  async require(): Promise<EnvState> {
    const s = await this.read();
    if (!s) throw new EnvNotRunningError(this.name);
    return s;
  }

  async write(s: EnvState): Promise<void> {
    await writeFile(this.statePath, JSON.stringify(s, null, 2));
  }
}
