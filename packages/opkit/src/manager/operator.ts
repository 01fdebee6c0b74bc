/**
 * An operator project's single description of itself — its name, its kinds, its flags and its
 * controllers — read by `runOperator` at run time and by `opkit generate` to derive CRDs, RBAC and
 * deployment manifests, so the two can never disagree.
 */
import type { ExtraPolicyRule } from "../client/builtins.ts";
import type { KindCacheEntry } from "../cache/cache.ts";
import type { KindRef, KubeObject } from "../client/types.ts";
import type { Controller } from "../controller/controller.ts";
import { createLogger, type Logger } from "../logging/index.ts";
import {
  FlagError,
  operatorUsage,
  parseOperatorFlags,
  type FlagSpec,
  type FlagValues,
  type OperatorFlags,
} from "./flags.ts";
import type { WebhookHandler } from "../webhook/server.ts";
import { GracefulShutdownTimeoutError, Manager, type ManagerOptions, type Runnable } from "./manager.ts";

/** What a controller factory receives: the parsed values of the operator's own flags, and its logger. */
export interface OperatorContext {
  /** The values of the operator's own flags (`OperatorDefinition.flags`), parsed. */
  flags: FlagValues;
  /** The operator's logger, for controllers that log outside reconciles. */
  logger: Logger;
}

/**
 * Everything about an operator in one exported value: its kinds, controller factories, flags, RBAC extras and
 * webhooks. `opkit run`, `opkit generate` (CRDs, RBAC, manifests) and the tests' `operatorProject` all read
 * it, so there is one source of truth.
 */
export interface OperatorDefinition {
  /** DNS-label name: the Deployment, ServiceAccount, Lease and field manager are named after it. */
  name: string;
  /** The API domain of its kinds (e.g. "example.com"). */
  domain?: string;
  /** Namespace it is deployed to (default `<name>-system`). */
  namespace?: string;
  /** Image for the generated Deployment. */
  image?: string;
  /** The custom kinds it defines (CRDs are generated from them). */
  kinds: readonly KindRef[];
  /** Factories, so that each Manager (tests, `opkit run`) gets fresh controller instances. */
  controllers: readonly ((ctx: OperatorContext) => Controller<KubeObject>)[];
  /** Other things to run with the manager (pollers, servers), made per Manager like controllers. */
  runnables?: readonly ((ctx: OperatorContext) => Runnable)[];
  /** The operator's own command-line flags, e.g. `{ "billing-url": { env: "BILLING_URL", ... } }`. */
  flags?: Readonly<Record<string, FlagSpec>>;
  /** RBAC rules beyond what the controllers' watches imply (e.g. reading Nodes it never caches). */
  extraRules?: readonly ExtraPolicyRule[];
  /** Restrict caches to one namespace (least privilege: Roles instead of ClusterRoles). */
  watchNamespace?: string;
  /**
   * Per-kind cache options, e.g. `[cacheKind(Secrets, { labelSelector: "opkit.dev/manager=my-op" })]`
   * so the operator caches its own Secrets, not every Secret of the cluster. Reads the cache cannot
   * answer (an object outside the selector) go to the API server.
   */
  cacheKinds?: readonly KindCacheEntry[];
  /**
   * Admission and conversion webhooks (`validator`, `defaulter`, `conversion`): served by the manager,
   * and `opkit generate` derives the webhook configurations, CRD conversion and Service from them.
   */
  webhooks?: readonly WebhookHandler[];
  /**
   * How generated manifests give the webhook server its certificate: "opkit" (a Secret with a CA and a
   * certificate generated next to the project, in `.opkit/`, not to be committed) or "cert-manager"
   * (an Issuer and a Certificate; the CA bundle is injected). Default "opkit"; `opkit generate
   * --webhook-certs` overrides it.
   */
  webhookCertificates?: "opkit" | "cert-manager";
  /**
   * Migrate the stored objects of the operator's own CRDs to their storage version once leader, and trim
   * their `status.storedVersions` (true, or the writes per second to allow; default 50). The generated RBAC
   * then grants what that takes: get on the CRDs and patch on their status (by name), list and update on
   * the kinds, and StorageVersionMigrations.
   */
  migrateStorage?:
    | boolean
    | {
        /** Writes per second the migration may make at most (default 50). */
        qps?: number;
      };
}

/** A wrong operator definition (bad name, flag clashing with a built-in). */
export class OperatorDefinitionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OperatorDefinitionError";
  }
}

/**
 * Check and return an operator definition (name a DNS label, flags not clashing with the built-in ones);
 * export the result as the project's default export.
 */
export function defineOperator(def: OperatorDefinition): OperatorDefinition {
  if (!/^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$/.test(def.name)) {
    throw new OperatorDefinitionError(
      `operator name "${def.name}" must be a DNS label: lowercase letters, digits and '-'`,
    );
  }
  // Validates the flag names against the built-in ones now, not at the first start.
  parseOperatorFlags(
    [],
    {},
    Object.fromEntries(Object.entries(def.flags ?? {}).map(([n, f]) => [n, { ...f, required: false }])),
  );
  return def;
}

/**
 * A context for building an operator's controllers without running them (code generation reads their
 * watches): flags at their defaults, a silent logger.
 */
export function offlineContext(def: OperatorDefinition): OperatorContext {
  const flags = Object.fromEntries(Object.entries(def.flags ?? {}).map(([n, f]) => [n, f.default]));
  return { flags, logger: createLogger({ name: def.name, level: "silent" }) };
}

/** The Manager options an operator's flags stand for. */
export function managerOptionsFromFlags(
  def: OperatorDefinition,
  flags: OperatorFlags,
  logger: Logger,
): ManagerOptions {
  const namespaces =
    flags.namespaces.length > 0 ? flags.namespaces : def.watchNamespace ? [def.watchNamespace] : [];
  return {
    name: def.name,
    kubeconfig: flags.kubeconfig,
    logger,
    leaderElection: flags.leaderElect ? { name: def.name } : false,
    storageMigration: def.migrateStorage
      ? { crds: operatorCrdNames(def), qps: def.migrateStorage === true ? undefined : def.migrateStorage.qps }
      : undefined,
    shards:
      flags.shards > 0
        ? {
            count: flags.shards,
            filtering: flags.shardFiltering,
            leaseDurationMs: flags.shardLeaseDurationSeconds * 1000,
            renewDeadlineMs: Math.round((flags.shardLeaseDurationSeconds * 2000) / 3),
            retryPeriodMs: Math.round((flags.shardLeaseDurationSeconds * 2000) / 15),
          }
        : undefined,
    cache:
      namespaces.length === 1
        ? { namespace: namespaces[0], kinds: def.cacheKinds }
        : namespaces.length > 1
          ? { namespaces, kinds: def.cacheKinds }
          : def.cacheKinds
            ? { kinds: def.cacheKinds }
            : undefined,
    metrics: flags.metricsBindAddress,
    health: flags.healthProbeBindAddress,
    webhook:
      def.webhooks?.length && flags.webhookBindAddress
        ? { handlers: def.webhooks, ...flags.webhookBindAddress, certDir: flags.webhookCertDir }
        : undefined,
  };
}

/**
 * Run an operator as its container does: flags from the command line (kubebuilder's names, see
 * `operatorUsage`), each with an environment fallback, until SIGTERM. A wrong flag prints what is wrong
 * and exits 2; `--help` prints the usage.
 */
export async function runOperator(
  def: OperatorDefinition,
  overrides: Partial<ManagerOptions> = {},
  argv: readonly string[] = process.argv.slice(2),
): Promise<void> {
  let flags: OperatorFlags;
  try {
    flags = parseOperatorFlags(argv, process.env, def.flags, { interactive: process.stdout.isTTY });
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`${def.name}: ${err.message}\n\n${operatorUsage(def.name, def.flags)}\n`);
    process.exit(2);
  }
  if (flags.help) {
    process.stdout.write(`${operatorUsage(def.name, def.flags)}\n`);
    return;
  }
  const logger =
    overrides.logger ?? createLogger({ name: def.name, level: flags.logLevel, format: flags.logFormat });
  const mgr = await Manager.create({ ...managerOptionsFromFlags(def, flags, logger), ...overrides });
  const ctx: OperatorContext = { flags: flags.custom, logger };
  for (const make of def.controllers) mgr.add(make(ctx));
  for (const make of def.runnables ?? []) mgr.add(make(ctx));
  // Started by `opkit run`/`opkit dev` with an IPC channel: when that parent dies (even by SIGKILL) the
  // channel closes, and the operator stops instead of running on as an orphan.
  if (process.channel) {
    process.channel.unref();
    process.once("disconnect", () => {
      logger.info("the process that started this operator is gone; stopping");
      void mgr.stop();
    });
  }
  try {
    await mgr.run();
  } catch (err) {
    if (!(err instanceof GracefulShutdownTimeoutError)) throw err;
    // Stopped, but not cleanly: say so and exit non-zero, without a stack trace.
    logger.error({ graceMs: err.graceMs, unfinished: err.unfinished }, err.message);
    process.exitCode = 1;
  }
}

/** The names (`<plural>.<group>`) of the CRDs of an operator's own kinds, each once. */
export function operatorCrdNames(def: Pick<OperatorDefinition, "kinds">): string[] {
  const names = def.kinds.flatMap((k) => {
    const { plural, group } = k as { plural?: string; group?: string };
    return plural && group ? [`${plural}.${group}`] : [];
  });
  return [...new Set(names)];
}
