/**
 * Where the cluster is and who we are, without @kubernetes/client-node: kubeconfig files (the fields
 * client-go reads), `$KUBECONFIG` lists merged the way kubectl merges them, contexts and their namespace,
 * and the in-cluster service account. The result is a plain `ClusterConfig`; `credentials.ts` turns it
 * into TLS material and headers.
 *
 * client-node costs ~80 MiB and ~0.6 s of CPU to import, so it is loaded only for what this file does
 * not handle itself (auth-provider plugins, see credentials.ts), and a client-node `KubeConfig` handed in
 * by a caller is read through its `exportConfig()` without importing the package.
 */
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import type { KubeConfig as ClientNodeKubeConfig } from "@kubernetes/client-node";
import { KubeconfigError } from "./errors.ts";

/** Bytes given inline (PEM text or bytes), or a file that is read, and read again when it changes. */
export type Material =
  | {
      /** The PEM text or bytes themselves. */
      data: string | Uint8Array;
    }
  | {
      /** A file to read them from (re-read when it changes). */
      file: string;
    };

/** An exec credential plugin (`users[].user.exec`), e.g. `aws eks get-token` or `gke-gcloud-auth-plugin`. */
export interface ExecConfig {
  /** The plugin executable, found on PATH unless a path is given. */
  command: string;
  /** Arguments passed to the plugin. */
  args?: string[];
  /** Extra environment variables for the plugin. */
  env?: {
    /** The variable's name. */
    name: string;
    /** Its value. */
    value: string;
  }[];
  /** `client.authentication.k8s.io/v1` or `/v1beta1`: the ExecCredential version exchanged. */
  apiVersion: string;
  /** Shown when the command is not installed. */
  installHint?: string;
  /** Pass the cluster's address and CA to the plugin in `KUBERNETES_EXEC_INFO`. */
  provideClusterInfo?: boolean;
  /** "Always" cannot work in an operator (no terminal) and is refused when the plugin is first run. */
  interactiveMode?: "Never" | "IfAvailable" | "Always";
  /** The cluster's `client.authentication.k8s.io/exec` extension, passed as `spec.cluster.config`. */
  clusterExtension?: unknown;
}

/** A legacy auth-provider plugin (`users[].user.auth-provider`: oidc, azure, gcp), run by client-node. */
export interface AuthProviderConfig {
  /** The provider's name, e.g. "oidc". */
  name: string;
  /** The provider's settings as the kubeconfig holds them (client-node may write refreshed tokens back). */
  config?: Record<string, string>;
}

/** Impersonation (`as`, `as-uid`, `as-groups`, `as-user-extra`): sent as Impersonate-* headers. */
export interface ImpersonationConfig {
  /** The user name to act as. */
  user?: string;
  /** The uid of the user to act as. */
  uid?: string;
  /** The groups to act as a member of. */
  groups?: string[];
  /** Extra user attributes to act with, by key. */
  extra?: Record<string, string[]>;
}

/**
 * Everything the client needs to reach one cluster as one user. Built by `loadClusterConfig` (kubeconfig
 * or in-cluster), or by hand, e.g. `{ server: "https://127.0.0.1:6443", certificateAuthority: { file },
 * tokenFile }`. File materials are re-read when they change, so rotated certificates and tokens are used.
 */
export interface ClusterConfig {
  /** The API server's URL; a path after the host is kept as a prefix of every request. */
  server: string;
  /** The CA bundle that signed the server's certificate; default the system's trust store. */
  certificateAuthority?: Material;
  /** Skip verifying the server's certificate; only for throwaway local clusters, never in production. */
  insecureSkipTLSVerify?: boolean;
  /** The name to verify the server's certificate against, when it differs from the host. */
  tlsServerName?: string;
  /** An http(s) or socks5 proxy for this cluster; otherwise HTTPS_PROXY/NO_PROXY apply. */
  proxyUrl?: string;
  /** The client certificate (mTLS), with `clientKey`. */
  clientCertificate?: Material;
  /** The private key of `clientCertificate`. */
  clientKey?: Material;
  /** A bearer token sent as the Authorization header. */
  token?: string;
  /** A bearer token file, re-read at most every `credentialReloadMs` (a rotated service account token). */
  tokenFile?: string;
  /** Basic auth user name (rarely enabled on real clusters). */
  username?: string;
  /** Basic auth password. */
  password?: string;
  /**
   * Act as another user or group (needs the `impersonate` verb), e.g. to test an operator under its own RBAC.
   */
  impersonate?: ImpersonationConfig;
  /** An exec credential plugin that prints a token or certificate (cloud providers' login helpers). */
  exec?: ExecConfig;
  /** A legacy auth-provider plugin (oidc, azure, gcp). */
  authProvider?: AuthProviderConfig;
  /** The context's default namespace (in a pod: the service account's namespace). */
  namespace?: string;
  /** Where this came from, for messages: a file and context, or "in-cluster". */
  source?: string;
}

/** How to find the configuration: `loadClusterConfig`'s options. */
export interface LoadClusterConfigOptions {
  /** An explicit kubeconfig path (a flag): used alone, and it must exist. */
  kubeconfig?: string;
  /** A context instead of the file's current-context. */
  context?: string;
}

/** The files and directories the loading rules read; injectable for tests. */
export interface ConfigEnvironment {
  env?: Record<string, string | undefined>;
  home?: string;
  /** The root under which /var/run/secrets/kubernetes.io/serviceaccount is looked for (default "/"). */
  root?: string;
}

const SERVICE_ACCOUNT_DIR = "var/run/secrets/kubernetes.io/serviceaccount";
const EXEC_API_VERSIONS = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"];
const EXEC_EXTENSION = "client.authentication.k8s.io/exec";

/**
 * The standard loading rules: an explicit path; else the files of `$KUBECONFIG` that exist, merged (the
 * first file to define a name or current-context wins); else `~/.kube/config`; else the in-cluster
 * service account (when `KUBERNETES_SERVICE_HOST` is set).
 */
export async function loadClusterConfig(
  options: LoadClusterConfigOptions = {},
  where: ConfigEnvironment = {},
): Promise<ClusterConfig> {
  const env = where.env ?? process.env;
  let files: string[];
  if (options.kubeconfig) {
    if (!existsSync(options.kubeconfig)) {
      throw new KubeconfigError(`kubeconfig ${options.kubeconfig} does not exist: pass an existing file`);
    }
    files = [options.kubeconfig];
  } else {
    files = (env.KUBECONFIG ?? "").split(delimiter).filter((f) => f && existsSync(f));
    if (files.length === 0) {
      const home = where.home ?? env.HOME ?? homedir();
      const fallback = join(home, ".kube", "config");
      if (existsSync(fallback)) files = [fallback];
    }
  }
  if (files.length === 0) {
    if (env.KUBERNETES_SERVICE_HOST) {
      if (options.context) {
        throw new KubeconfigError(
          `context "${options.context}" was asked for, but there is no kubeconfig (only the in-cluster service account): pass a kubeconfig path or drop the context`,
        );
      }
      return inClusterConfig(where);
    }
    throw new KubeconfigError(
      "no Kubernetes cluster configured: pass a kubeconfig path, set KUBECONFIG, create ~/.kube/config, or run inside a cluster",
    );
  }
  // js-yaml, as @kubernetes/client-node reads kubeconfigs (and installed with it): parse-only, its first
  // parse of a kubeconfig costs ~8 ms of CPU where yaml's cost ~21 (yaml's 260 KB compile lazily on the
  // first document), a tenth of an operator's start-up. The core schema: plain YAML 1.2 values, no
  // timestamps turned into Dates, no merge keys, as yaml parsed them.
  const { loadAll, CORE_SCHEMA } = await import("js-yaml");
  const docs: { doc: RawKubeconfig; file: string }[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      throw new KubeconfigError(`cannot read kubeconfig ${file}: ${(err as Error).message}`, { cause: err });
    }
    let doc: unknown;
    try {
      // loadAll: a file of comments only is an empty kubeconfig (kubectl skips it while merging), where
      // js-yaml's load throws.
      const all = loadAll(text, { schema: CORE_SCHEMA });
      if (all.length > 1) throw new Error(`${all.length} documents; a kubeconfig is one`);
      doc = all[0] ?? {};
    } catch (err) {
      throw new KubeconfigError(`kubeconfig ${file} is not valid YAML: ${(err as Error).message}`, {
        cause: err,
      });
    }
    docs.push({ doc: asRawKubeconfig(doc, file), file });
  }
  return resolveKubeconfig(mergeKubeconfigs(docs), options.context, files.join(delimiter));
}

/** The service account a pod runs as: the API server's Service, its CA, a rotated token file, the namespace. */
export function inClusterConfig(where: ConfigEnvironment = {}): ClusterConfig {
  const env = where.env ?? process.env;
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new KubeconfigError(
      "not running inside a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set",
    );
  }
  const dir = join(where.root ?? "/", SERVICE_ACCOUNT_DIR);
  const tokenFile = join(dir, "token");
  if (!existsSync(tokenFile)) {
    throw new KubeconfigError(
      `in-cluster: ${tokenFile} does not exist: mount the service account token (automountServiceAccountToken must not be false)`,
    );
  }
  let namespace: string | undefined;
  try {
    namespace = readFileSync(join(dir, "namespace"), "utf8").trim() || undefined;
  } catch {
    namespace = undefined;
  }
  const ca = join(dir, "ca.crt");
  return {
    server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    certificateAuthority: existsSync(ca) ? { file: ca } : undefined,
    tokenFile,
    namespace: namespace ?? env.POD_NAMESPACE,
    source: "in-cluster service account",
  };
}

/**
 * A @kubernetes/client-node `KubeConfig` (e.g. one a test helper built) as a ClusterConfig, read through
 * its `exportConfig()` so the package is not imported here.
 */
export function configFromClientNode(kc: ClientNodeKubeConfig, context?: string): ClusterConfig {
  let doc: unknown;
  try {
    doc = JSON.parse(kc.exportConfig());
  } catch (err) {
    throw new KubeconfigError(`cannot read the KubeConfig object: ${(err as Error).message}`, { cause: err });
  }
  const raw = asRawKubeconfig(doc, "a @kubernetes/client-node KubeConfig");
  return resolveKubeconfig(
    { ...raw, "current-context": context ?? kc.getCurrentContext() },
    undefined,
    "the KubeConfig object",
  );
}

/** True for a @kubernetes/client-node KubeConfig (checked by shape: the package is not imported). */
export function isClientNodeKubeConfig(value: unknown): value is ClientNodeKubeConfig {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { exportConfig?: unknown }).exportConfig === "function" &&
    typeof (value as { getCurrentContext?: unknown }).getCurrentContext === "function"
  );
}

// ---- kubeconfig documents ----

type Obj = Record<string, unknown>;

interface Named {
  name: string;
  body: Obj;
  /** The file that defined it: relative paths are resolved against its directory. */
  file: string;
}

interface RawKubeconfig {
  clusters: Named[];
  users: Named[];
  contexts: Named[];
  "current-context"?: string;
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function asRawKubeconfig(doc: unknown, file: string): RawKubeconfig {
  if (doc === null || doc === undefined) doc = {};
  if (!isObj(doc))
    throw new KubeconfigError(`kubeconfig ${file} is not a mapping: expected a Config document`);
  const list = (key: "clusters" | "users" | "contexts", inner: string): Named[] => {
    const v = doc[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) throw new KubeconfigError(`kubeconfig ${file}: ${key} must be a list`);
    return v.map((e: unknown, i) => {
      if (!isObj(e) || typeof e.name !== "string" || !e.name) {
        throw new KubeconfigError(`kubeconfig ${file}: ${key}[${i}].name must be a non-empty string`);
      }
      const body = e[inner] ?? {};
      if (!isObj(body))
        throw new KubeconfigError(`kubeconfig ${file}: ${key}[${i}].${inner} must be a mapping`);
      return { name: e.name, body, file };
    });
  };
  const current = doc["current-context"];
  return {
    clusters: list("clusters", "cluster"),
    users: list("users", "user"),
    contexts: list("contexts", "context"),
    "current-context": typeof current === "string" && current ? current : undefined,
  };
}

/** kubectl's merge: the first file to define a name (or current-context) wins. */
function mergeKubeconfigs(docs: { doc: RawKubeconfig; file: string }[]): RawKubeconfig {
  const merged: RawKubeconfig = { clusters: [], users: [], contexts: [] };
  for (const { doc } of docs) {
    for (const key of ["clusters", "users", "contexts"] as const) {
      for (const e of doc[key]) if (!merged[key].some((m) => m.name === e.name)) merged[key].push(e);
    }
    merged["current-context"] ??= doc["current-context"];
  }
  return merged;
}

function resolveKubeconfig(merged: RawKubeconfig, wanted: string | undefined, files: string): ClusterConfig {
  const contextName = wanted ?? merged["current-context"];
  if (!contextName) {
    throw new KubeconfigError(
      `${files} has no current-context: set one (kubectl config use-context) or pass a context`,
    );
  }
  const ctx = merged.contexts.find((c) => c.name === contextName);
  if (!ctx) {
    const known = merged.contexts.map((c) => c.name).join(", ") || "none";
    throw new KubeconfigError(`${files} has no context "${contextName}" (contexts: ${known})`);
  }
  const where = `context "${contextName}"`;
  const clusterName = str(ctx.body, "cluster", `${where}.cluster`);
  const cluster = merged.clusters.find((c) => c.name === clusterName);
  if (!clusterName || !cluster) {
    throw new KubeconfigError(
      `${files}: ${where} names cluster "${clusterName ?? ""}", which is not defined`,
    );
  }
  const userName = str(ctx.body, "user", `${where}.user`);
  const user = userName ? merged.users.find((u) => u.name === userName) : undefined;
  if (userName && !user) {
    throw new KubeconfigError(`${files}: ${where} names user "${userName}", which is not defined`);
  }
  const c = cluster.body;
  const cw = `clusters["${cluster.name}"].cluster`;
  const server = str(c, "server", `${cw}.server`);
  if (!server) throw new KubeconfigError(`${files}: ${cw}.server is missing: set the API server's URL`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeconfigError(`${files}: ${cw}.server "${server}" is not a URL (e.g. https://10.0.0.1:6443)`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new KubeconfigError(`${files}: ${cw}.server "${server}" must be an http or https URL`);
  }
  const config: ClusterConfig = {
    server: server.replace(/\/+$/, ""),
    certificateAuthority: material(c, "certificate-authority", cluster.file, `${cw}`),
    insecureSkipTLSVerify: bool(c, "insecure-skip-tls-verify", `${cw}`),
    tlsServerName: str(c, "tls-server-name", `${cw}.tls-server-name`),
    proxyUrl: str(c, "proxy-url", `${cw}.proxy-url`),
    namespace: str(ctx.body, "namespace", `${where}.namespace`),
    source: `${files}, context "${contextName}"`,
  };
  if (config.proxyUrl) checkProxyUrl(config.proxyUrl, `${files}: ${cw}.proxy-url`);
  if (user) Object.assign(config, userFields(user, c));
  return config;
}

function userFields(user: Named, cluster: Obj): Partial<ClusterConfig> {
  const u = user.body;
  const uw = `users["${user.name}"].user`;
  const out: Partial<ClusterConfig> = {
    clientCertificate: material(u, "client-certificate", user.file, uw),
    clientKey: material(u, "client-key", user.file, uw),
    token: str(u, "token", `${uw}.token`),
    username: str(u, "username", `${uw}.username`),
    password: str(u, "password", `${uw}.password`),
  };
  const tokenFile = str(u, "tokenFile", `${uw}.tokenFile`);
  if (tokenFile) out.tokenFile = resolvePath(tokenFile, user.file);
  if (!out.clientCertificate !== !out.clientKey) {
    throw new KubeconfigError(
      `${uw}: client-certificate and client-key go together: set both (or their -data forms)`,
    );
  }
  const impersonate: ImpersonationConfig = {
    user: str(u, "as", `${uw}.as`),
    uid: str(u, "as-uid", `${uw}.as-uid`),
    groups: strList(u, "as-groups", `${uw}.as-groups`),
  };
  const extra = u["as-user-extra"];
  if (isObj(extra)) {
    impersonate.extra = {};
    for (const k of Object.keys(extra)) {
      impersonate.extra[k] = strList(extra, k, `${uw}.as-user-extra.${k}`) ?? [];
    }
  }
  if (impersonate.user || impersonate.uid || impersonate.groups?.length || impersonate.extra) {
    out.impersonate = impersonate;
  }
  const exec = u.exec;
  if (isObj(exec)) out.exec = execConfig(exec, `${uw}.exec`, user.file, cluster);
  const provider = u["auth-provider"];
  if (isObj(provider)) {
    const name = str(provider, "name", `${uw}.auth-provider.name`);
    if (!name) throw new KubeconfigError(`${uw}.auth-provider.name is missing`);
    const cfg: Record<string, string> = {};
    const raw = provider.config;
    if (isObj(raw)) for (const [k, v] of Object.entries(raw)) if (typeof v === "string") cfg[k] = v;
    // client-node's in-cluster KubeConfig models the rotating token file as an auth-provider.
    if (name === "tokenFile" && cfg.tokenFile) out.tokenFile = cfg.tokenFile;
    else out.authProvider = { name, config: cfg };
  }
  return out;
}

function execConfig(e: Obj, where: string, file: string, cluster: Obj): ExecConfig {
  const command = str(e, "command", `${where}.command`);
  if (!command) throw new KubeconfigError(`${where}.command is missing: name the credential plugin to run`);
  const apiVersion = str(e, "apiVersion", `${where}.apiVersion`);
  if (!apiVersion || !EXEC_API_VERSIONS.includes(apiVersion)) {
    throw new KubeconfigError(
      `${where}.apiVersion "${apiVersion ?? ""}" is not supported: use ${EXEC_API_VERSIONS.join(" or ")}`,
    );
  }
  const env: { name: string; value: string }[] = [];
  const rawEnv = e.env;
  if (Array.isArray(rawEnv)) {
    rawEnv.forEach((v: unknown, i) => {
      if (!isObj(v) || typeof v.name !== "string" || typeof v.value !== "string") {
        throw new KubeconfigError(`${where}.env[${i}] must have a string name and value`);
      }
      env.push({ name: v.name, value: v.value });
    });
  }
  const mode = str(e, "interactiveMode", `${where}.interactiveMode`);
  if (mode !== undefined && mode !== "Never" && mode !== "IfAvailable" && mode !== "Always") {
    throw new KubeconfigError(`${where}.interactiveMode "${mode}" must be Never, IfAvailable or Always`);
  }
  const extensions = cluster.extensions;
  const ext = Array.isArray(extensions)
    ? (extensions as unknown[]).find((x): x is Obj => isObj(x) && x.name === EXEC_EXTENSION)
    : undefined;
  return {
    // A command with a path separator is relative to the kubeconfig; a bare name is looked up in PATH.
    command: command.includes("/") ? resolvePath(command, file) : command,
    args: strList(e, "args", `${where}.args`),
    env,
    apiVersion,
    installHint: str(e, "installHint", `${where}.installHint`),
    provideClusterInfo: bool(e, "provideClusterInfo", where),
    interactiveMode: mode,
    clusterExtension: ext?.extension,
  };
}

function str(o: Obj, key: string, where: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string") throw new KubeconfigError(`${where} must be a string`);
  return v;
}

function bool(o: Obj, key: string, where: string): boolean | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw new KubeconfigError(`${where}.${key} must be true or false`);
  return v;
}

function strList(o: Obj, key: string, where: string): string[] | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
    throw new KubeconfigError(`${where} must be a list of strings`);
  }
  return v;
}

/** `<key>-data` (base64) wins over `<key>` (a path), as in client-go. */
function material(o: Obj, key: string, file: string, where: string): Material | undefined {
  const data = str(o, `${key}-data`, `${where}.${key}-data`);
  if (data) {
    const bytes = Buffer.from(data, "base64");
    if (bytes.length === 0) throw new KubeconfigError(`${where}.${key}-data is not base64`);
    return { data: bytes };
  }
  const path = str(o, key, `${where}.${key}`);
  return path ? { file: resolvePath(path, file) } : undefined;
}

function resolvePath(path: string, kubeconfigFile: string): string {
  if (isAbsolute(path) || !existsSync(kubeconfigFile)) return path;
  return join(dirname(kubeconfigFile), path);
}

/** Proxies client-go supports for a cluster: http, https and socks5. */
export function checkProxyUrl(proxyUrl: string, where: string): void {
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw new KubeconfigError(`${where} "${proxyUrl}" is not a URL (e.g. http://proxy.example:3128)`);
  }
  if (!["http:", "https:", "socks5:"].includes(url.protocol)) {
    throw new KubeconfigError(`${where} "${proxyUrl}" must use http, https or socks5`);
  }
}
