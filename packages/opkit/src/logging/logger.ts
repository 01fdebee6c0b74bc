/**
 * The logger factory, redaction and the controller-runtime-shaped reconcile and controller loggers.
 */
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { pino, type DestinationStream, type Logger as PinoLogger } from "pino";

/**
 * The logger every opkit component takes: a pino logger, so child loggers, levels and bindings work as pino
 * documents.
 */
export type Logger = PinoLogger;

/** The log levels opkit accepts (pino's); "silent" turns logging off, e.g. in tests. */
export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

/** "json" for machines (one object per line); "text" for people at a terminal. */
export type LogFormat = "json" | "text";

const LEVELS: readonly string[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** What a redacted value is replaced with, so a reader sees a value was there and was hidden on purpose. */
export const REDACTED = "[REDACTED]";

/**
 * Paths whose values never reach the output. pino's `*` matches one level, so each key is listed at
 * the top level and one level down (`{token}` and `{auth: {token}}`).
 */
export const DEFAULT_REDACT_PATHS: readonly string[] = [
  "token",
  "password",
  "secret",
  "authorization",
  "bearerToken",
  "clientKey",
  "*.token",
  "*.password",
  "*.secret",
  "*.authorization",
  "*.bearerToken",
  "*.clientKey",
  "headers.authorization",
  "headers.cookie",
  "req.headers.authorization",
  "req.headers.cookie",
  "*.headers.authorization",
];

/** How `createLogger` builds a logger: level, name, destination, format and extra redaction. */
export interface LoggerOptions {
  /** Default: $OPKIT_LOG_LEVEL, else $LOG_LEVEL, else "info". */
  level?: LogLevel;
  /** The logger's name (the `logger` field of every line). */
  name?: string;
  /** Where lines go; default stdout. Tests pass a stream they read. */
  destination?: DestinationStream;
  /**
   * "json" (default) or "text": time, coloured level, the controller and object first, then the
   * message and the other fields, as controller-runtime's development mode prints.
   */
  format?: LogFormat;
  /** Extra redact paths on top of DEFAULT_REDACT_PATHS. */
  redact?: readonly string[];
}

/** An unknown level name, from the options or an environment variable. */
export class InvalidLogLevelError extends Error {
  /** The level name that was rejected, as given. */
  readonly level: string;
  constructor(level: string, source: string) {
    super(`unknown log level "${level}" from ${source}: use one of ${LEVELS.join(", ")}`);
    this.name = "InvalidLogLevelError";
    this.level = level;
  }
}

/**
 * Create the root logger of an operator: JSON lines shaped like controller-runtime's (or text for a
 * terminal), credentials redacted, synchronous writes so the last lines before a crash are not lost. Throws
 * `InvalidLogLevelError` for an unknown level.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = resolveLevel(options.level);
  return pino(
    {
      level,
      // The logger's name goes under "logger" (as controller-runtime's zap logs): "name" is the
      // reconciled object's name. Without pid/hostname: the log collector attaches both.
      base: options.name ? { logger: options.name } : {},
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: [...DEFAULT_REDACT_PATHS, ...(options.redact ?? [])], censor: REDACTED },
      formatters: {
        level: (label) => ({ level: label }),
        log: (object) => redactSecretObjects(object, 0) as Record<string, unknown>,
      },
    },
    // Synchronous writes: the last lines before a crash or a lost lease are the ones that matter, and
    // an async buffer would drop them on exit.
    options.format === "text"
      ? textDestination(options.destination)
      : (options.destination ?? pino.destination({ dest: 1, sync: true })),
  );
}

interface PrettyOptions {
  destination?: DestinationStream | number;
  sync?: boolean;
  colorize?: boolean;
  translateTime?: string;
  ignore?: string;
  messageFormat?: string;
  singleLine?: boolean;
}

/**
 * pino-pretty, loaded only when text logs are asked for: operators in containers log JSON and should
 * not pay for a formatter they never use.
 */
function textDestination(destination: DestinationStream | undefined): DestinationStream {
  const pretty = createRequire(import.meta.url)("pino-pretty") as (o: PrettyOptions) => DestinationStream;
  return pretty({
    destination: destination ?? 1,
    sync: true,
    colorize: destination === undefined && Boolean(process.stdout.isTTY),
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "logger,controller,namespace,name,reconcileID",
    // The object a line is about comes first: "[gadgets] ns/name  message".
    messageFormat:
      "{if controller}[{controller}] {end}{if namespace}{namespace}/{end}{if name}{name}  {end}{msg}",
    singleLine: true,
  });
}

function resolveLevel(option: LogLevel | undefined): LogLevel {
  const candidates: [string | undefined, string][] = [
    [option, "the level option"],
    [process.env.OPKIT_LOG_LEVEL, "$OPKIT_LOG_LEVEL"],
    [process.env.LOG_LEVEL, "$LOG_LEVEL"],
  ];
  for (const [value, source] of candidates) {
    if (value === undefined || value === "") continue;
    const level = value.toLowerCase();
    if (!LEVELS.includes(level)) throw new InvalidLogLevelError(value, source);
    return level as LogLevel;
  }
  return "info";
}

/** Fields of one reconcile's log lines, named as in controller-runtime's JSON logs. */
export interface ReconcileLogFields {
  /** The controller's name, as in the metrics' `controller` label. */
  controller: string;
  /** The reconciled object's namespace (absent for cluster-scoped objects). */
  namespace?: string;
  /** The reconciled object's name. */
  name?: string;
  /** Default: a fresh UUID, so every line of one reconcile can be grepped together. */
  reconcileID?: string;
}

/**
 * A child logger for one reconcile; its lines carry controller, namespace, name and reconcileID. The child
 * is made on first use: pino serializes and redacts a child's bindings when it is made (~50 µs), and most
 * reconciles log nothing.
 */
export function reconcileLogger(parent: Logger, fields: ReconcileLogFields): Logger {
  const bindings: Record<string, string> = {
    controller: fields.controller,
    reconcileID: fields.reconcileID ?? randomUUID(),
  };
  if (fields.namespace) bindings.namespace = fields.namespace;
  if (fields.name !== undefined) bindings.name = fields.name;
  return lazyChild(parent, bindings);
}

/** `parent.child(bindings)`, made when a property of it is first read or written. */
function lazyChild(parent: Logger, bindings: Record<string, string>): Logger {
  let child: Logger | undefined;
  const real = (): Logger => (child ??= parent.child(bindings));
  return new Proxy(Object.create(null) as Logger, {
    get(_, key) {
      const target = real();
      const value: unknown = Reflect.get(target, key, target);
      // pino's methods read their logger from `this`.
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
    set: (_, key, value) => Reflect.set(real(), key, value),
    has: (_, key) => Reflect.has(real(), key),
    getPrototypeOf: () => Reflect.getPrototypeOf(real()),
  });
}

/** A child logger for a controller's own lines (start, stop, sync). */
export function controllerLogger(parent: Logger, controller: string): Logger {
  return parent.child({ controller });
}

// Path patterns cannot say "data, but only of a Secret", and redacting every `data` would hide
// ConfigMaps too. So Secret-shaped objects (kind "Secret") found in a log call's fields, a few levels
// deep, get their values replaced; the keys stay, since which keys exist is what one debugs.
const MAX_SCAN_DEPTH = 4;

function redactSecretObjects(value: unknown, depth: number): unknown {
  if (depth > MAX_SCAN_DEPTH || typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((v: unknown) => {
      const r = redactSecretObjects(v, depth + 1);
      if (r !== v) changed = true;
      return r;
    });
    return changed ? out : value;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const obj = value as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  if (obj.kind === "Secret") {
    out = { ...obj };
    for (const field of ["data", "stringData"]) {
      const data = obj[field];
      if (typeof data === "object" && data !== null) {
        out[field] = Object.fromEntries(Object.keys(data).map((k) => [k, REDACTED]));
      }
    }
  }
  for (const [k, v] of Object.entries(obj)) {
    if (out && (k === "data" || k === "stringData")) continue;
    const r = redactSecretObjects(v, depth + 1);
    if (r !== v) {
      out ??= { ...obj };
      out[k] = r;
    }
  }
  return out ?? value;
}
