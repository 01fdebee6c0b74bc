/**
 * migrate — moving stored objects to a CRD's storage version (the in-tree StorageVersionMigration where the
 * cluster serves it, else opkit's own rate-limited pass) and trimming `status.storedVersions` afterwards,
 * so an old version can be dropped safely. It knows the client, the clock and logging; the manager (its
 * `storageMigration` option) and the CLI (`opkit migrate`) call it.
 */
export {
  migrateStorage,
  MigrationError,
  type MigrateOptions,
  type MigrationProgress,
  type MigrationResult,
} from "./storage.ts";
export {
  storageMigrationRunnable,
  type StorageMigrationOptions,
  type StorageMigrationRunnable,
} from "./runnable.ts";
