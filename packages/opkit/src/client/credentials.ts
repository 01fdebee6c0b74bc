/**
 * Credentials for one cluster, kept fresh: TLS material (CA, client certificate and key) and the
 * headers that authenticate a request (bearer token, token file, basic auth, exec plugin, auth-provider,
 * impersonation).
 *
 * Rotation: files (certificates, keys, token files) are checked at most every `reloadIntervalMs`; a
 * certificate/key pair that changed is re-read and checked to match before it is used, and bumps the
 * TLS `generation` so the transport opens new connections with it. After a 401 the transport calls
 * `refresh`, which re-reads the files at once and runs an exec plugin again.
 *
 * Auth-provider plugins (oidc, azure, gcp) are the one thing delegated to @kubernetes/client-node,
 * imported on first use only.
 */
import { readFile, stat } from "node:fs/promises";
import { createSecureContext } from "node:tls";
import type { KubeConfig as ClientNodeKubeConfig } from "@kubernetes/client-node";
import type { ClusterConfig, Material } from "./config.ts";
import { CredentialsError } from "./errors.ts";
import { ExecPlugin, type ExecClusterInfo } from "./exec.ts";

/** What a new connection needs; `generation` changes whenever any of it does. */
export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer | string;
  key?: Buffer | string;
  rejectUnauthorized: boolean;
  servername?: string;
  generation: number;
}

/** How `Credentials` watches for rotation. */
export interface CredentialsOptions {
  /** Monotonic milliseconds (the transport's `now`). */
  now: () => number;
  /** How often files are checked for changes (default 60 s, client-go's token file period). */
  reloadIntervalMs?: number;
  /** An exec plugin is run again after a 401 at most this often (default 10 s). */
  execRefreshMinIntervalMs?: number;
  /** Told when rotated credentials were picked up, or a changed file could not be used (old kept). */
  onEvent?: (event: CredentialsEvent) => void;
}

/** A credential change worth a log line (never carries the secret). */
export interface CredentialsEvent {
  kind: "reloaded" | "reload-failed";
  /** What: "client certificate", "token file /path", "exec plugin aws". */
  what: string;
  error?: Error;
}

/** A file's identity: a rewrite or a symlink swap (how Kubernetes updates projected volumes) changes it. */
async function signature(path: string): Promise<string> {
  const s = await stat(path);
  return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
}

interface FileState {
  path: string;
  sig: string;
  content: Buffer;
}

async function readTracked(path: string, what: string): Promise<FileState> {
  try {
    const sig = await signature(path);
    return { path, sig, content: await readFile(path) };
  } catch (err) {
    throw new CredentialsError(`cannot read the ${what} ${path}: ${(err as Error).message}`, { cause: err });
  }
}

type TlsSlot = "ca" | "cert" | "key";
const SLOT_NAMES: Record<TlsSlot, string> = {
  ca: "certificate authority",
  cert: "client certificate",
  key: "client key",
};

/** The credentials of one ClusterConfig, kept fresh (see the module comment). */
export class Credentials {
  private readonly config: ClusterConfig;
  private readonly now: () => number;
  private readonly interval: number;
  private readonly execMinInterval: number;
  private readonly onEvent: (event: CredentialsEvent) => void;
  private readonly exec: ExecPlugin | undefined;

  private readonly files = new Map<TlsSlot, FileState>();
  private material: TlsMaterial | undefined;
  private tlsCheckedAt = 0;
  private tlsCheck: Promise<boolean> | undefined;
  private execCertGeneration = 0;

  private token: string | undefined;
  private tokenReadAt = 0;
  private lastExecRefresh = Number.NEGATIVE_INFINITY;
  /** Bumped when the bearer credential changes: a 401 for an older one is answered by retrying. */
  private authGeneration = 0;
  private delegate: Promise<ClientNodeKubeConfig> | undefined;

  constructor(config: ClusterConfig, options: CredentialsOptions) {
    this.config = config;
    this.now = options.now;
    this.interval = options.reloadIntervalMs ?? 60_000;
    this.execMinInterval = options.execRefreshMinIntervalMs ?? 10_000;
    this.onEvent = options.onEvent ?? (() => undefined);
    this.exec = config.exec ? new ExecPlugin(config.exec, () => this.execClusterInfo()) : undefined;
  }

  /** The generation of the bearer credential in use; pass it back to `refresh` after a 401. */
  get authState(): number {
    return this.authGeneration;
  }

  /** TLS material for new connections, re-read from files that changed (checked at most every interval). */
  async tls(): Promise<TlsMaterial> {
    if (!this.material) {
      this.material = await this.loadTls();
      this.tlsCheckedAt = this.now();
    } else if (this.now() - this.tlsCheckedAt >= this.interval && this.files.size > 0) {
      this.tlsCheckedAt = this.now();
      await this.checkTlsFiles();
    }
    const execCred = this.exec?.peek();
    if (this.exec && execCred?.clientCertificateData && this.execCertGeneration !== this.exec.generation) {
      this.execCertGeneration = this.exec.generation;
      this.material = {
        ...this.material,
        cert: execCred.clientCertificateData,
        key: execCred.clientKeyData,
        generation: this.material.generation + 1,
      };
    }
    return this.material;
  }

  /** Headers that authenticate one request. */
  async headers(): Promise<Record<string, string | string[]>> {
    const h: Record<string, string | string[]> = {};
    const bearer = await this.bearer();
    const c = this.config;
    if (bearer) h.authorization = `Bearer ${bearer}`;
    else if (c.username !== undefined && c.password !== undefined) {
      h.authorization = `Basic ${Buffer.from(`${c.username}:${c.password}`).toString("base64")}`;
    } else if (c.authProvider) {
      const v = await this.providerAuthorization();
      if (v) h.authorization = v;
    }
    const imp = c.impersonate;
    if (imp?.user) h["impersonate-user"] = imp.user;
    if (imp?.uid) h["impersonate-uid"] = imp.uid;
    if (imp?.groups?.length) h["impersonate-group"] = imp.groups;
    for (const [k, v] of Object.entries(imp?.extra ?? {})) {
      h[`impersonate-extra-${encodeURIComponent(k)}`] = v;
    }
    return h;
  }

  /**
   * After a 401: run the exec plugin again, re-read the token file and the certificate files now.
   * Returns true when a retry may succeed (a newer credential is there than the one refused).
   */
  async refresh(refusedState: number): Promise<boolean> {
    if (refusedState !== this.authGeneration) return true; // another request already refreshed it
    let changed = false;
    if (this.exec) {
      // A plugin whose fresh credential is refused too must not be run for every request.
      if (this.now() - this.lastExecRefresh < this.execMinInterval) return false;
      this.lastExecRefresh = this.now();
      this.exec.invalidate();
      await this.exec.credential();
      this.authGeneration++;
      return true;
    }
    if (this.config.tokenFile) {
      const before = this.token;
      await this.readTokenFile(true);
      changed = this.token !== before;
    }
    if (this.files.size > 0) {
      this.tlsCheckedAt = this.now();
      changed = (await this.checkTlsFiles()) || changed;
    }
    return changed;
  }

  private async bearer(): Promise<string | undefined> {
    if (this.exec) {
      const before = this.exec.generation;
      const cred = await this.exec.credential();
      if (this.exec.generation !== before) this.authGeneration++;
      if (cred.token) return cred.token;
      return undefined;
    }
    if (this.config.tokenFile) {
      if (this.token === undefined || this.now() - this.tokenReadAt >= this.interval) {
        await this.readTokenFile(false);
      }
      return this.token;
    }
    return this.config.token;
  }

  private async readTokenFile(force: boolean): Promise<void> {
    const path = this.config.tokenFile ?? "";
    this.tokenReadAt = this.now();
    let text: string;
    try {
      text = (await readFile(path, "utf8")).trim();
      if (!text) throw new Error("the file is empty");
    } catch (err) {
      if (this.token !== undefined) {
        // A token being rewritten may be briefly missing: keep the one we have and look again later.
        this.onEvent({ kind: "reload-failed", what: `token file ${path}`, error: err as Error });
        return;
      }
      if (this.config.token) {
        this.token = this.config.token;
        return;
      }
      throw new CredentialsError(`cannot read the token file ${path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (text !== this.token) {
      if (this.token !== undefined || force) this.onEvent({ kind: "reloaded", what: `token file ${path}` });
      this.token = text;
      this.authGeneration++;
    }
  }

  private async loadTls(): Promise<TlsMaterial> {
    const c = this.config;
    const slots: [TlsSlot, Material | undefined][] = [
      ["ca", c.certificateAuthority],
      ["cert", c.clientCertificate],
      ["key", c.clientKey],
    ];
    const got: Partial<Record<TlsSlot, Buffer>> = {};
    for (const [slot, m] of slots) {
      if (!m) continue;
      if ("file" in m) {
        const f = await readTracked(m.file, SLOT_NAMES[slot]);
        this.files.set(slot, f);
        got[slot] = f.content;
      } else got[slot] = Buffer.from(m.data);
    }
    if (got.cert && got.key) checkPair(got.cert, got.key, "the configured client certificate and key");
    return {
      ca: got.ca,
      cert: got.cert,
      key: got.key,
      rejectUnauthorized: !c.insecureSkipTLSVerify,
      servername: c.tlsServerName,
      generation: 1,
    };
  }

  /** Re-read changed TLS files; returns true when new material is in use. One check at a time. */
  private checkTlsFiles(): Promise<boolean> {
    this.tlsCheck ??= this.doCheckTlsFiles().finally(() => (this.tlsCheck = undefined));
    return this.tlsCheck;
  }

  private async doCheckTlsFiles(): Promise<boolean> {
    let changed = false;
    for (const f of this.files.values()) {
      try {
        if ((await signature(f.path)) !== f.sig) changed = true;
      } catch {
        changed = true; // gone for a moment (being replaced): re-read below reports it
      }
    }
    if (!changed || !this.material) return false;
    const fresh = new Map<TlsSlot, FileState>();
    try {
      for (const [slot, f] of this.files) fresh.set(slot, await readTracked(f.path, SLOT_NAMES[slot]));
      const cert = fresh.get("cert")?.content ?? this.material.cert;
      const key = fresh.get("key")?.content ?? this.material.key;
      // Writers replace the certificate and the key one after the other: a half-rotated pair is kept
      // out until both files agree.
      if (cert && key) checkPair(cert, key, "the rotated client certificate and key");
    } catch (err) {
      this.onEvent({ kind: "reload-failed", what: "TLS files", error: err as Error });
      return false;
    }
    for (const [slot, f] of fresh) this.files.set(slot, f);
    this.material = {
      ...this.material,
      ca: fresh.get("ca")?.content ?? this.material.ca,
      cert: fresh.get("cert")?.content ?? this.material.cert,
      key: fresh.get("key")?.content ?? this.material.key,
      generation: this.material.generation + 1,
    };
    this.onEvent({ kind: "reloaded", what: [...fresh.keys()].map((s) => SLOT_NAMES[s]).join(", ") });
    return true;
  }

  private async execClusterInfo(): Promise<ExecClusterInfo> {
    const c = this.config;
    const tls = await this.tls();
    return {
      server: c.server,
      "tls-server-name": c.tlsServerName,
      "insecure-skip-tls-verify": c.insecureSkipTLSVerify,
      "certificate-authority-data": tls.ca?.toString("base64"),
      "proxy-url": c.proxyUrl,
      config: c.exec?.clusterExtension,
    };
  }

  /** The Authorization header an auth-provider plugin computes, through client-node (loaded now). */
  private async providerAuthorization(): Promise<string | undefined> {
    this.delegate ??= this.clientNodeConfig();
    const kc = await this.delegate;
    const opts: { headers: Record<string, string | string[] | number> } = { headers: {} };
    try {
      await kc.applyToHTTPSOptions(opts);
    } catch (err) {
      throw new CredentialsError(
        `auth-provider ${this.config.authProvider?.name ?? ""} failed: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const v = opts.headers.Authorization ?? opts.headers.authorization;
    return v === undefined ? undefined : String(v);
  }

  private async clientNodeConfig(): Promise<ClientNodeKubeConfig> {
    const { KubeConfig } = await import("@kubernetes/client-node");
    const kc = new KubeConfig();
    // Only the Authorization header is taken from it: its cluster is a placeholder that is never
    // dialled (client-node refuses to build agents for plain-http servers, which tests use).
    kc.loadFromOptions({
      clusters: [{ name: "cluster", server: "https://auth-provider.opkit.invalid" }],
      users: [{ name: "user", authProvider: this.config.authProvider }],
      contexts: [{ name: "context", cluster: "cluster", user: "user" }],
      currentContext: "context",
    });
    return kc;
  }
}

function checkPair(cert: Buffer | string, key: Buffer | string, what: string): void {
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new CredentialsError(`${what} cannot be used together: ${(err as Error).message}`, { cause: err });
  }
}
