/**
 * Exec credential plugins (client-go's `exec` auth: `aws eks get-token`, `gke-gcloud-auth-plugin`,
 * `kubelogin`, …): run the command with `KUBERNETES_EXEC_INFO`, read the ExecCredential it prints,
 * keep it until its expirationTimestamp, and run the plugin again when the server answers 401.
 *
 * Done here rather than through @kubernetes/client-node: its ExecAuth cannot be told that a credential
 * was refused (so a revoked token would be reused until it expires), and importing it costs ~80 MiB.
 */
import type * as ChildProcess from "node:child_process";
import { createRequire } from "node:module";
import type { ExecConfig } from "./config.ts";
import { CredentialsError } from "./errors.ts";

/** What a plugin hands back: a bearer token, or a client certificate and key (PEM). */
export interface ExecCredentialStatus {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  /** RFC 3339; absent means valid until the server refuses it. */
  expirationTimestamp?: string;
}

/** The cluster as described to a plugin that asked for it (`provideClusterInfo`). */
export interface ExecClusterInfo {
  server: string;
  "tls-server-name"?: string;
  "insecure-skip-tls-verify"?: boolean;
  "certificate-authority-data"?: string;
  "proxy-url"?: string;
  config?: unknown;
}

/** A plugin's output beyond this is not a credential: stop reading instead of filling memory. */
const MAX_OUTPUT_BYTES = 1 << 20;
/** A plugin that has not answered by then is stuck (waiting for a browser or a prompt): kill it. */
const DEFAULT_TIMEOUT_MS = 60_000;

/** Runs one exec plugin and caches what it returns. */
export class ExecPlugin {
  private readonly exec: ExecConfig;
  private readonly clusterInfo: () => Promise<ExecClusterInfo>;
  private readonly timeoutMs: number;
  private cached: ExecCredentialStatus | undefined;
  private running: Promise<ExecCredentialStatus> | undefined;
  /** Bumped whenever a new credential arrives, so callers can tell a fresh certificate from the old one. */
  generation = 0;

  constructor(exec: ExecConfig, clusterInfo: () => Promise<ExecClusterInfo>, timeoutMs = DEFAULT_TIMEOUT_MS) {
    this.exec = exec;
    this.clusterInfo = clusterInfo;
    this.timeoutMs = timeoutMs;
  }

  /** The cached credential while it is valid; otherwise the plugin's fresh answer (one run at a time). */
  async credential(): Promise<ExecCredentialStatus> {
    const c = this.cached;
    if (c && !expired(c)) return c;
    this.running ??= this.run().finally(() => (this.running = undefined));
    return this.running;
  }

  /** The last credential, if the plugin has run (does not run it). */
  peek(): ExecCredentialStatus | undefined {
    return this.cached;
  }

  /** Forget the cached credential (the server refused it): the next `credential()` runs the plugin. */
  invalidate(): void {
    this.cached = undefined;
  }

  private async run(): Promise<ExecCredentialStatus> {
    const { command, args = [], apiVersion } = this.exec;
    if (this.exec.interactiveMode === "Always") {
      throw new CredentialsError(
        `exec plugin ${command} needs a terminal (interactiveMode: Always), which an operator does not have: configure a non-interactive credential`,
      );
    }
    const spec: { interactive: false; cluster?: ExecClusterInfo } = { interactive: false };
    if (this.exec.provideClusterInfo) spec.cluster = await this.clusterInfo();
    const env: Record<string, string | undefined> = { ...process.env };
    for (const e of this.exec.env ?? []) env[e.name] = e.value;
    env.KUBERNETES_EXEC_INFO = JSON.stringify({ apiVersion, kind: "ExecCredential", spec });
    const output = await runCommand(command, args, env, this.timeoutMs, this.exec.installHint);
    const status = parseExecCredential(output, command, apiVersion);
    this.cached = status;
    this.generation++;
    return status;
  }
}

function expired(c: ExecCredentialStatus): boolean {
  if (!c.expirationTimestamp) return false;
  return Date.parse(c.expirationTimestamp) <= Date.now();
}

// node:child_process is loaded on the first plugin run: most clusters need no plugin, and loading it cost
// every operator ~3 ms of start-up CPU.
const requireBuiltin = createRequire(import.meta.url);

function runCommand(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
  timeoutMs: number,
  installHint: string | undefined,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const { spawn } = requireBuiltin("node:child_process") as typeof ChildProcess;
    const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = "";
    let failure: Error | undefined;
    const timer = setTimeout(() => {
      failure = new CredentialsError(`exec plugin ${command} did not answer within ${timeoutMs / 1000} s`);
      child.kill("SIGKILL");
    }, timeoutMs);
    child.stdout.on("data", (d: Buffer) => {
      outBytes += d.length;
      if (outBytes > MAX_OUTPUT_BYTES) {
        failure ??= new CredentialsError(
          `exec plugin ${command} printed more than 1 MiB: not an ExecCredential`,
        );
        child.kill("SIGKILL");
        return;
      }
      out.push(d);
    });
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => {
      // Keep only the tail: it holds the reason when the plugin fails.
      err = (err + d).slice(-2000);
    });
    child.on("error", (e: NodeJS.ErrnoException) => {
      failure ??=
        e.code === "ENOENT"
          ? new CredentialsError(
              `exec plugin ${command} was not found${installHint ? `: ${installHint.trim()}` : " (is it installed and on PATH?)"}`,
              { cause: e },
            )
          : new CredentialsError(`exec plugin ${command} could not start: ${e.message}`, { cause: e });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (failure) return reject(failure);
      if (code !== 0) {
        return reject(
          new CredentialsError(
            `exec plugin ${command} failed (${signal ? `signal ${signal}` : `exit code ${code}`})${err.trim() ? `: ${err.trim()}` : ""}`,
          ),
        );
      }
      resolve(Buffer.concat(out).toString("utf8"));
    });
  });
}

/** Validate a plugin's output; messages never include the credential itself. */
export function parseExecCredential(
  output: string,
  command: string,
  apiVersion: string,
): ExecCredentialStatus {
  let doc: unknown;
  try {
    doc = JSON.parse(output);
  } catch {
    throw new CredentialsError(`exec plugin ${command} did not print JSON: expected an ExecCredential`);
  }
  const o = doc as { apiVersion?: unknown; kind?: unknown; status?: unknown };
  if (typeof doc !== "object" || doc === null || o.kind !== "ExecCredential") {
    throw new CredentialsError(`exec plugin ${command} printed something that is not an ExecCredential`);
  }
  if (o.apiVersion !== apiVersion) {
    throw new CredentialsError(
      `exec plugin ${command} answered with apiVersion ${String(o.apiVersion)}, but the kubeconfig asks for ${apiVersion}`,
    );
  }
  const s = o.status as Record<string, unknown> | undefined;
  if (typeof s !== "object" || s === null) {
    throw new CredentialsError(`exec plugin ${command} returned an ExecCredential without status`);
  }
  const field = (k: string): string | undefined => {
    const v = s[k];
    if (v === undefined || v === null || v === "") return undefined;
    if (typeof v !== "string")
      throw new CredentialsError(`exec plugin ${command}: status.${k} must be a string`);
    return v;
  };
  const status: ExecCredentialStatus = {
    token: field("token"),
    clientCertificateData: field("clientCertificateData"),
    clientKeyData: field("clientKeyData"),
    expirationTimestamp: field("expirationTimestamp"),
  };
  if (!status.clientCertificateData !== !status.clientKeyData) {
    throw new CredentialsError(
      `exec plugin ${command} returned only one of status.clientCertificateData and status.clientKeyData`,
    );
  }
  if (!status.token && !status.clientCertificateData) {
    throw new CredentialsError(`exec plugin ${command} returned neither a token nor a client certificate`);
  }
  if (status.expirationTimestamp && Number.isNaN(Date.parse(status.expirationTimestamp))) {
    throw new CredentialsError(
      `exec plugin ${command}: status.expirationTimestamp "${status.expirationTimestamp}" is not an RFC 3339 time`,
    );
  }
  return status;
}
