/**
 * Storage version migration: after a CRD's storage version changes, every object still stored in an older
 * version is rewritten in the new one, and only then are the old versions removed from the CRD's
 * `status.storedVersions`, the list that says which versions etcd may still hold. Before that a version
 * must not be dropped from the CRD: the API server could no longer read the objects stored in it.
 *
 * Where the cluster serves the in-tree migrator (`storagemigration.k8s.io`), a StorageVersionMigration is
 * created and followed; when it fails or makes no progress, opkit does the pass itself: it reads live
 * objects from the API server in pages (never from an informer cache, which may drop fields, and always in
 * the storage version, so no lossy version is in the path) and writes each back unchanged with its
 * resourceVersion as precondition. The API server encodes the object in the storage version on that
 * write; an object already stored in it is a no-op (no etcd write). A conflict means someone else wrote
 * the object since it was read, which stored it in the new version too. An expired continue token (410)
 * restarts the pass from the beginning: tokens do not survive etcd compaction.
 *
 * Mutating admission webhooks see these writes as ordinary updates: one that changes objects on every
 * update changes them here too.
 */
import { sleep, realClock, type Clock } from "../clock/index.ts";
import type { KubeClient } from "../client/client.ts";
import {
  ConflictError,
  ConnectionError,
  GoneError,
  NotFoundError,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
  UnknownKindError,
} from "../client/errors.ts";
import { CustomResourceDefinitions, type CustomResourceDefinition } from "../client/builtins.ts";
import { kindRef, type KindRef, type KubeObject } from "../client/types.ts";

const Crds = CustomResourceDefinitions;

/** How the pass went so far; passed to `onProgress` after every page and at the end. */
export interface MigrationProgress {
  /** The CRD being migrated, `<plural>.<group>`. */
  crd: string;
  /** "in-tree" while a StorageVersionMigration runs, "opkit" during opkit's own pass. */
  method: "in-tree" | "opkit";
  /** Objects written back (or found already rewritten) in this pass. */
  migrated: number;
  /** Writes that met a newer resourceVersion: someone else rewrote the object, which migrated it. */
  conflicts: number;
  /** Objects deleted between the list and the write. */
  gone: number;
  /** How many times the pass started over after its continue token expired. */
  restarts: number;
  /** Milliseconds since the migration started. */
  elapsedMs: number;
}

/** What `migrateStorage` did. */
export interface MigrationResult extends MigrationProgress {
  /** The storage version every object is now stored in. */
  storageVersion: string;
  /** `status.storedVersions` before the migration. */
  storedVersionsBefore: string[];
  /** False when storedVersions already held only the storage version: nothing was rewritten. */
  needed: boolean;
  /** Objects per second of the pass (0 when nothing was written). */
  rate: number;
}

/** Options of `migrateStorage`. */
export interface MigrateOptions {
  /** Writes per second at most (default 50): a migration must not crowd out the operator's own traffic. */
  qps?: number;
  /** Objects per list page (default 500). */
  pageSize?: number;
  /** "auto" (default) uses the in-tree migrator where the cluster serves it; "never" always does its own pass. */
  inTree?: "auto" | "never";
  /** How long a StorageVersionMigration may go without finishing before opkit does the pass itself (default 60 s). */
  inTreeTimeoutMs?: number;
  /** Called after every page and at the end. */
  onProgress?: (progress: MigrationProgress) => void;
  /** Stops the migration; storedVersions are then left as they were. */
  signal?: AbortSignal;
  /**
   * How long one request may keep failing transiently (5xx, 429, no connection: an API server restarting
   * answers 503 for a while) before the migration gives up (default 120 s).
   */
  retryForMs?: number;
  /** Time source (default the real clock). */
  clock?: Clock;
}

/** A migration that could not finish; storedVersions were left as they were. */
export class MigrationError extends Error {
  /** The CRD, `<plural>.<group>`. */
  readonly crd: string;
  constructor(crd: string, message: string, options?: ErrorOptions) {
    super(`migrating ${crd}: ${message}`, options);
    this.name = "MigrationError";
    this.crd = crd;
  }
}

/**
 * Rewrites every object of the CRD `crdName` in its storage version, then sets `status.storedVersions` to
 * that version alone. Safe to run again and to interrupt: an interrupted pass leaves storedVersions as they
 * were, and the next run starts over.
 */
export async function migrateStorage(
  client: KubeClient,
  crdName: string,
  options: MigrateOptions = {},
): Promise<MigrationResult> {
  const clock = options.clock ?? realClock;
  const started = clock.now();
  const crd = await client.get(Crds, crdName, { signal: options.signal });
  const storage = crd.spec.versions.find((v) => v.storage);
  if (!storage) throw new MigrationError(crdName, "the CRD has no storage version");
  const before = [...(crd.status?.storedVersions ?? [])];
  const progress: MigrationProgress = {
    crd: crdName,
    method: "opkit",
    migrated: 0,
    conflicts: 0,
    gone: 0,
    restarts: 0,
    elapsedMs: 0,
  };
  const report = (): void => {
    progress.elapsedMs = clock.now() - started;
    options.onProgress?.({ ...progress });
  };
  const needed = before.length !== 1 || before[0] !== storage.name;
  if (needed) {
    const kind = kindRef(`${crd.spec.group}/${storage.name}`, crd.spec.names.kind);
    const inTreeDone =
      options.inTree !== "never" && (await runInTree(client, crd, progress, report, options, clock));
    if (!inTreeDone) {
      progress.method = "opkit";
      await rewriteAll(client, kind, progress, report, options, clock);
    }
    await trimStoredVersions(client, crdName, storage.name, options.signal);
  }
  report();
  const seconds = progress.elapsedMs / 1000;
  return {
    ...progress,
    storageVersion: storage.name,
    storedVersionsBefore: before,
    needed,
    rate: seconds > 0 ? progress.migrated / seconds : 0,
  };
}

/** opkit's own pass: every object, page by page, written back unchanged with its resourceVersion. */
async function rewriteAll(
  client: KubeClient,
  kind: KindRef,
  progress: MigrationProgress,
  report: () => void,
  options: MigrateOptions,
  clock: Clock,
): Promise<void> {
  const interval = 1000 / (options.qps ?? 50);
  let nextWrite = clock.now();
  let cont: string | undefined;
  do {
    let page;
    try {
      const from = cont;
      page = await retrying(options, clock, () =>
        client.list(kind, { limit: options.pageSize ?? 500, continue: from, signal: options.signal }),
      );
    } catch (err) {
      if (!(err instanceof GoneError) || cont === undefined) throw err;
      // The continue token expired (compaction): objects written since are stored in the new version
      // already, but ones not reached yet may not be; start over.
      progress.restarts++;
      cont = undefined;
      continue;
    }
    for (const item of page.items) {
      const wait = nextWrite - clock.now();
      if (wait > 0) await sleep(clock, wait, options.signal);
      nextWrite = Math.max(nextWrite, clock.now()) + interval;
      const obj = { ...item, apiVersion: kind.apiVersion, kind: kind.kind };
      await retrying(options, clock, () => rewriteOne(client, obj, progress, options.signal));
    }
    report();
    cont = page.metadata.continue || undefined;
  } while (cont);
}

async function rewriteOne(
  client: KubeClient,
  obj: KubeObject,
  progress: MigrationProgress,
  signal?: AbortSignal,
): Promise<void> {
  try {
    await client.update(obj, { signal });
    progress.migrated++;
  } catch (err) {
    if (err instanceof ConflictError) progress.conflicts++;
    else if (err instanceof NotFoundError) progress.gone++;
    else throw err;
  }
}

/** A failure worth waiting out: the API server is restarting, overloaded or unreachable for a moment. */
function transient(err: unknown): boolean {
  return (
    err instanceof ServerError ||
    err instanceof TooManyRequestsError ||
    err instanceof TimeoutError ||
    err instanceof ConnectionError
  );
}

/**
 * Runs `fn` again after transient failures, waiting 200 ms doubling to 5 s, for `retryForMs` at most. Repeating a
 * write is safe here: each carries its resourceVersion, so a repeat of an applied one meets a conflict.
 */
async function retrying<T>(options: MigrateOptions, clock: Clock, fn: () => Promise<T>): Promise<T> {
  const deadline = clock.now() + (options.retryForMs ?? 120_000);
  for (let delay = 200; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await fn();
    } catch (err) {
      if (!transient(err) || clock.now() + delay > deadline) throw err;
      await sleep(clock, delay, options.signal);
    }
  }
}

/** Sets storedVersions to the storage version alone, if the storage version is still the one migrated to. */
async function trimStoredVersions(
  client: KubeClient,
  crdName: string,
  storage: string,
  signal?: AbortSignal,
): Promise<void> {
  const live = await client.get(Crds, crdName, { signal });
  const now = live.spec.versions.find((v) => v.storage)?.name;
  if (now !== storage)
    throw new MigrationError(
      crdName,
      `the storage version changed from ${storage} to ${now ?? "none"} during the migration; run it again`,
    );
  await client.patch(
    Crds,
    crdName,
    { status: { storedVersions: [storage] } },
    { type: "merge", subresource: "status", signal },
  );
}

/** The StorageVersionMigration kinds, newest first (GA in 1.37, beta before). */
const SVM_VERSIONS = ["storagemigration.k8s.io/v1", "storagemigration.k8s.io/v1beta1"];

type Svm = KubeObject & {
  spec: { resource: { group: string; resource: string } };
  status?: { conditions?: { type: string; status: string; message?: string }[] };
};

/**
 * Creates a StorageVersionMigration and follows it; true once it succeeded. False when the cluster does not
 * serve the API, the migration failed, or it did not finish in time (it is then deleted).
 */
async function runInTree(
  client: KubeClient,
  crd: CustomResourceDefinition,
  progress: MigrationProgress,
  report: () => void,
  options: MigrateOptions,
  clock: Clock,
): Promise<boolean> {
  const kind = await servedSvmKind(client, options.signal);
  if (!kind) return false;
  progress.method = "in-tree";
  report();
  const created = await client.create<Svm>(
    {
      apiVersion: kind.apiVersion,
      kind: kind.kind,
      metadata: { generateName: `opkit-${crd.spec.names.plural}-` },
      spec: { resource: { group: crd.spec.group, resource: crd.spec.names.plural } },
    },
    { signal: options.signal },
  );
  const name = created.metadata.name ?? "";
  const deadline = clock.now() + (options.inTreeTimeoutMs ?? 60_000);
  try {
    while (clock.now() < deadline) {
      const live = await client.get(kind, name, { signal: options.signal });
      const conditions = live.status?.conditions ?? [];
      if (conditions.some((c) => c.type === "Succeeded" && c.status === "True")) return true;
      if (conditions.some((c) => c.type === "Failed" && c.status === "True")) break;
      await sleep(clock, 1_000, options.signal);
    }
  } finally {
    await client.delete(kind, name, { signal: options.signal }).catch(() => undefined);
  }
  return false;
}

async function servedSvmKind(client: KubeClient, signal?: AbortSignal): Promise<KindRef<Svm> | undefined> {
  for (const apiVersion of SVM_VERSIONS) {
    const kind = kindRef<Svm>(apiVersion, "StorageVersionMigration");
    try {
      await client.mapping(kind, { signal });
      return kind;
    } catch (err) {
      if (!(err instanceof UnknownKindError)) throw err;
    }
  }
  return undefined;
}
