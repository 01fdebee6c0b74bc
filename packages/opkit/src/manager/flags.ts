/**
 * The command-line contract of every opkit operator, with kubebuilder's flag names so that manifests
 * and habits carry over: `--metrics-bind-address`, `--health-probe-bind-address`,
 * `--webhook-bind-address`, `--leader-elect`, `--log-level`, `--log-format`, plus `--kubeconfig` and
 * `--namespace`. Each has an environment variable fallback (for container manifests) and a default;
 * an operator declares its own flags next to these and receives their values.
 *
 * Parsing is pure (argv and environment in, values or a FlagError out) so it is tested without a
 * process; `runOperator` applies it.
 */
import { parseArgs } from "node:util";
import type { LogFormat, LogLevel } from "../logging/index.ts";
import type { ListenAddress } from "./manager.ts";
import { DEFAULT_WEBHOOK_PORT } from "../webhook/server.ts";
import { DEFAULT_HEALTH_PORT, DEFAULT_METRICS_PORT } from "./server.ts";
import { errorMessage } from "../client/errors.ts";

/** Where the webhook server reads tls.crt and tls.key (controller-runtime's default; manifests mount it). */
export const DEFAULT_WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs";

/** An operator's own flag: `--billing-url`, with an environment fallback and a default. */
export interface FlagSpec {
  /** One line for `--help`: what the flag sets. */
  description: string;
  /** "string" (default) or "boolean". */
  type?: "string" | "boolean";
  /** Environment variable read when the flag is absent (e.g. "BILLING_URL"). */
  env?: string;
  /** The value when neither the flag nor its environment variable is given. */
  default?: string | boolean;
  /** Fail at start-up when neither the flag, its variable nor a default gives a value. */
  required?: boolean;
}

/** The values of an operator's own flags, by flag name. */
export type FlagValues = Readonly<Record<string, string | boolean | undefined>>;

/**
 * The command-line and environment contract every opkit operator shares (kubebuilder's flag names), parsed by
 * `runOperator`/`opkit run`, so deployments and `opkit run` configure any operator the same way.
 */
export interface OperatorFlags {
  /** false: disabled ("0"). */
  metricsBindAddress: ListenAddress | false;
  /** `--health-probe-bind-address` (default :8081; false when "0"): where /healthz and /readyz are served. */
  healthProbeBindAddress: ListenAddress | false;
  /**
   * `--webhook-bind-address` (default :9443; false when "0"): where admission and conversion webhooks are
   * served.
   */
  webhookBindAddress: ListenAddress | false;
  /** Directory holding the webhook server's tls.crt and tls.key (re-read when they change). */
  webhookCertDir: string;
  /**
   * `--leader-elect`: run the controllers on one replica only; turn it on when more than one replica runs.
   */
  leaderElect: boolean;
  /** `--shards`: the shard count of a sharded operator (0: not sharded). */
  shards: number;
  /** `--shard-lease-duration` in seconds (default 15). */
  shardLeaseDurationSeconds: number;
  /** `--shard-filtering`: who filters a sharded operator's informers (default auto: detect). */
  shardFiltering: "auto" | "server" | "client";
  /** `--log-level` (or $OPKIT_LOG_LEVEL / $LOG_LEVEL). */
  logLevel: LogLevel;
  /** `--log-format`: json for machines, text for people (default text when run interactively, else json). */
  logFormat: LogFormat;
  /** `--kubeconfig`: the cluster to talk to (default: $KUBECONFIG, ~/.kube/config, then in-cluster). */
  kubeconfig?: string;
  /** Namespaces to watch (empty: all). */
  namespaces: string[];
  /** The operator's own flags. */
  custom: FlagValues;
  /** `--help` was given: print `usage` and exit. */
  help: boolean;
}

/** A flag or environment variable with a wrong value; the message names it and says what to do. */
export class FlagError extends Error {
  /** The flag (or environment variable) that is wrong, e.g. "--metrics-bind-address". */
  readonly flag: string;
  constructor(flag: string, message: string) {
    super(`${flag}: ${message}`);
    this.name = "FlagError";
    this.flag = flag;
  }
}

interface BuiltinFlag {
  name: string;
  env: string;
  type: "string" | "boolean";
  default: string | boolean;
  description: string;
}

const BUILTIN: readonly BuiltinFlag[] = [
  {
    name: "metrics-bind-address",
    env: "OPKIT_METRICS_BIND_ADDRESS",
    type: "string",
    default: `:${DEFAULT_METRICS_PORT}`,
    description:
      'Address of the /metrics endpoint ("host:port" or ":port"; port 0 picks a free one; "0" disables).',
  },
  {
    name: "health-probe-bind-address",
    env: "OPKIT_HEALTH_PROBE_BIND_ADDRESS",
    type: "string",
    default: `:${DEFAULT_HEALTH_PORT}`,
    description: 'Address of /healthz and /readyz (same syntax; "0" disables).',
  },
  {
    name: "webhook-bind-address",
    env: "OPKIT_WEBHOOK_BIND_ADDRESS",
    type: "string",
    default: `:${DEFAULT_WEBHOOK_PORT}`,
    description: "Address of the webhook server, when the operator has webhooks (same syntax).",
  },
  {
    name: "webhook-cert-dir",
    env: "OPKIT_WEBHOOK_CERT_DIR",
    type: "string",
    default: DEFAULT_WEBHOOK_CERT_DIR,
    description: "Directory with the webhook server's tls.crt and tls.key (re-read when they change).",
  },
  {
    name: "leader-elect",
    env: "OPKIT_LEADER_ELECT",
    type: "boolean",
    default: false,
    description: "Elect a leader through a Lease so that several replicas can run safely.",
  },
  {
    name: "shards",
    env: "OPKIT_SHARDS",
    type: "string",
    default: "0",
    description:
      "Split the work into this many shards held through Leases, so several replicas reconcile side by side (0: off; not with --leader-elect).",
  },
  {
    name: "shard-lease-duration",
    env: "OPKIT_SHARD_LEASE_DURATION",
    type: "string",
    default: "15",
    description:
      "Seconds a dead replica's shards wait before others take them over (renew deadline 2/3 of it, retry 2/15).",
  },
  {
    name: "shard-filtering",
    env: "OPKIT_SHARD_FILTERING",
    type: "string",
    default: "auto",
    description:
      "auto (detect), server (shardSelector; needs the ShardedListAndWatch feature gate) or client (filter what arrives).",
  },
  {
    name: "log-level",
    env: "OPKIT_LOG_LEVEL",
    type: "string",
    default: "info",
    description: "fatal, error, warn, info, debug or trace.",
  },
  {
    name: "log-format",
    env: "OPKIT_LOG_FORMAT",
    type: "string",
    default: "",
    description: "json, or text for people (default: text on a terminal, json otherwise).",
  },
  {
    name: "kubeconfig",
    env: "KUBECONFIG",
    type: "string",
    default: "",
    description: "Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).",
  },
  {
    name: "namespace",
    env: "OPKIT_WATCH_NAMESPACE",
    type: "string",
    default: "",
    description:
      "Watch only these namespaces (comma-separated; default: all, or the operator's own setting).",
  },
];

const LOG_LEVELS: readonly LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/**
 * A bind address as kubebuilder writes it: ":8080" (all interfaces), "127.0.0.1:8080", "[::1]:8080",
 * port 0 for a free port, or "0" to disable the server.
 */
export function parseBindAddress(value: string, flag: string): ListenAddress | false {
  const v = value.trim();
  if (v === "0") return false;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(v);
  const port = m ? Number(m[3]) : NaN;
  if (!m || !(port >= 0 && port <= 65535))
    throw new FlagError(
      `--${flag}`,
      `"${value}" is not a bind address: write ":8080", "127.0.0.1:8080", ":0" for a free port, or "0" to disable`,
    );
  const host = m[1] ?? (m[2] || "0.0.0.0");
  return { host, port };
}

function parseWhole(value: string, flag: string, min: number, max: number): number {
  const n = Number(value.trim());
  if (!/^\d+$/.test(value.trim()) || n < min || n > max)
    throw new FlagError(flag, `"${value}" is not a whole number from ${min} to ${max}`);
  return n;
}

function parseBoolean(value: string, flag: string): boolean {
  const v = value.trim().toLowerCase();
  if (["true", "1", "yes"].includes(v)) return true;
  if (["false", "0", "no", ""].includes(v)) return false;
  throw new FlagError(flag, `"${value}" is not a boolean: use true or false`);
}

/** The command line's values by flag name; custom flag names are checked first. */
function parseCommandLine(
  argv: readonly string[],
  declared: Readonly<Record<string, FlagSpec>>,
): Record<string, string | boolean | undefined> {
  for (const name of Object.keys(declared)) {
    if (BUILTIN.some((b) => b.name === name) || name === "help")
      throw new FlagError(
        `--${name}`,
        "is a built-in flag of every opkit operator: give your flag another name",
      );
    if (!/^[a-z][a-z0-9-]*$/.test(name))
      throw new FlagError(`--${name}`, "flag names are lowercase words joined by '-', e.g. billing-url");
  }
  const spec: Record<string, { type: "string" | "boolean" }> = { help: { type: "boolean" } };
  for (const b of BUILTIN) spec[b.name] = { type: b.type };
  for (const [name, d] of Object.entries(declared)) spec[name] = { type: d.type ?? "string" };
  try {
    return parseArgs({ args: [...argv], options: spec, strict: true, allowPositionals: false }).values;
  } catch (err) {
    const known = Object.keys(spec)
      .map((n) => `--${n}`)
      .join(", ");
    throw new FlagError("command line", `${errorMessage(err)} (known flags: ${known})`);
  }
}

/**
 * Parse an operator's command line and environment. Unknown flags and bad values are FlagErrors that
 * name the flag; custom flags must not reuse a built-in name.
 */
export function parseOperatorFlags(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  declared: Readonly<Record<string, FlagSpec>> = {},
  options: { interactive?: boolean } = {},
): OperatorFlags {
  // Long on purpose: the flags are read in one place so that flag, environment and default keep one order of precedence.
  const values = parseCommandLine(argv, declared);

  const read = (name: string, envName: string | undefined, type: "string" | "boolean", dflt: unknown) => {
    const given = values[name];
    if (given !== undefined) return given;
    const fromEnv = envName ? env[envName] : undefined;
    if (fromEnv !== undefined && fromEnv !== "")
      return type === "boolean" ? parseBoolean(fromEnv, `$${envName}`) : fromEnv;
    return dflt as string | boolean | undefined;
  };
  const str = (name: string): string => {
    const b = BUILTIN.find((x) => x.name === name) as BuiltinFlag;
    return String(read(name, b.env, b.type, b.default) ?? "");
  };

  const logLevel = str("log-level").toLowerCase();
  if (!LOG_LEVELS.includes(logLevel as LogLevel))
    throw new FlagError("--log-level", `"${logLevel}" is not a level: use one of ${LOG_LEVELS.join(", ")}`);
  const formatGiven = str("log-format").toLowerCase();
  if (formatGiven && formatGiven !== "json" && formatGiven !== "text")
    throw new FlagError("--log-format", `"${formatGiven}" is not a format: use json or text`);
  const logFormat: LogFormat = formatGiven
    ? (formatGiven as LogFormat)
    : options.interactive
      ? "text"
      : "json";

  const custom: Record<string, string | boolean | undefined> = {};
  for (const [name, d] of Object.entries(declared)) {
    const v = read(name, d.env, d.type ?? "string", d.default);
    if (d.required && (v === undefined || v === ""))
      throw new FlagError(
        `--${name}`,
        `is required: pass --${name}${d.env ? ` or set $${d.env}` : ""} (${d.description})`,
      );
    custom[name] = v;
  }
  const shards = parseWhole(str("shards"), "--shards", 0, 4096);
  const shardLeaseDurationSeconds = parseWhole(
    str("shard-lease-duration"),
    "--shard-lease-duration",
    2,
    3600,
  );
  const shardFiltering = str("shard-filtering");
  if (shardFiltering !== "auto" && shardFiltering !== "server" && shardFiltering !== "client")
    throw new FlagError("--shard-filtering", `"${shardFiltering}" is not a mode: use auto, server or client`);
  const leaderElect = read("leader-elect", "OPKIT_LEADER_ELECT", "boolean", false) === true;
  if (shards > 0 && leaderElect)
    throw new FlagError(
      "--shards",
      "cannot be combined with --leader-elect: sharded replicas all work, each on its shards",
    );
  const kubeconfig = str("kubeconfig");
  const namespaces = str("namespace")
    .split(",")
    .map((n) => n.trim())
    .filter(Boolean);
  return {
    metricsBindAddress: parseBindAddress(str("metrics-bind-address"), "metrics-bind-address"),
    healthProbeBindAddress: parseBindAddress(str("health-probe-bind-address"), "health-probe-bind-address"),
    webhookBindAddress: parseBindAddress(str("webhook-bind-address"), "webhook-bind-address"),
    webhookCertDir: str("webhook-cert-dir"),
    leaderElect,
    shards,
    shardLeaseDurationSeconds,
    shardFiltering,
    logLevel: logLevel as LogLevel,
    logFormat,
    kubeconfig: kubeconfig || undefined,
    namespaces,
    custom,
    help: values.help === true,
  };
}

/** The usage text of an operator: the built-in flags, then its own. */
export function operatorUsage(name: string, declared: Readonly<Record<string, FlagSpec>> = {}): string {
  const rows = [
    ...BUILTIN.map((b) => [
      `--${b.name}${b.type === "string" ? " <value>" : ""}`,
      `${b.description} [$${b.env}]`,
    ]),
    ...Object.entries(declared).map(([n, d]) => [
      `--${n}${(d.type ?? "string") === "string" ? " <value>" : ""}`,
      `${d.description}${d.env ? ` [$${d.env}]` : ""}${d.required ? " (required)" : ""}`,
    ]),
  ];
  const width = Math.max(...rows.map(([f]) => (f ?? "").length));
  return [
    `Usage: ${name} [flags]`,
    "",
    ...rows.map(([f, d]) => `  ${(f ?? "").padEnd(width)}  ${d ?? ""}`),
  ].join("\n");
}
