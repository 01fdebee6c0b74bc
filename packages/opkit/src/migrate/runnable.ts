/**
 * Storage migration as part of an operator: after the leader is elected, beside the controllers (before
 * them it would hold the operator up for as long as the pass takes), each of the operator's CRDs whose
 * `status.storedVersions` still lists an old version is migrated to its storage version. A CRD already
 * stored in one version costs one read.
 */
import type { KubeClient } from "../client/client.ts";
import { errorMessage } from "../client/errors.ts";
import type { Clock } from "../clock/index.ts";
import type { Logger } from "../logging/index.ts";
import { migrateStorage } from "./storage.ts";

/** What the manager's `storageMigration` option takes. */
export interface StorageMigrationOptions {
  /** The CRDs to migrate, by name (`<plural>.<group>`); an operator's own. */
  crds: readonly string[];
  /** Writes per second at most (default 50): the controllers share the client's rate limit. */
  qps?: number;
  /** "never" skips the cluster's StorageVersionMigration even where it is served. */
  inTree?: "auto" | "never";
  /** Time source (default the real clock). */
  clock?: Clock;
}

/** What `storageMigrationRunnable` returns: a manager `Runnable` that only the leader runs. */
export interface StorageMigrationRunnable {
  /** "storage-migration", for logs. */
  readonly name: string;
  /** Always true: only the leader migrates. */
  readonly needLeaderElection: true;
  /** Migrates each CRD in turn; failures are logged, never thrown (the operator keeps running). */
  start(signal: AbortSignal): Promise<void>;
}

/** A runnable (shape of the manager's `Runnable`) that migrates `crds` once, on the leader. */
export function storageMigrationRunnable(
  client: KubeClient,
  opts: StorageMigrationOptions,
  logger: Logger,
): StorageMigrationRunnable {
  return {
    name: "storage-migration",
    needLeaderElection: true,
    async start(signal: AbortSignal): Promise<void> {
      for (const crd of opts.crds) {
        if (signal.aborted) return;
        try {
          const r = await migrateStorage(client, crd, {
            qps: opts.qps,
            inTree: opts.inTree,
            clock: opts.clock,
            signal,
          });
          if (r.needed)
            logger.info(
              {
                crd,
                storageVersion: r.storageVersion,
                storedVersionsBefore: r.storedVersionsBefore,
                migrated: r.migrated,
                conflicts: r.conflicts,
                seconds: r.elapsedMs / 1000,
              },
              "stored objects migrated; storedVersions trimmed",
            );
        } catch (err) {
          if (signal.aborted) return;
          // The operator keeps running: objects stay readable; only dropping the old version must wait.
          logger.error(
            { crd, err: errorMessage(err) },
            "storage migration failed; run `opkit migrate` or restart to retry",
          );
        }
      }
    },
  };
}
