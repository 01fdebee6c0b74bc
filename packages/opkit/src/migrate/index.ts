/**
 * migrate — moving stored objects to a CRD's storage version (the in-tree StorageVersionMigration where the
 * cluster serves it, else opkit's own rate-limited pass) and trimming `status.storedVersions` afterwards,
 * so an old version can be dropped safely. It knows the client and the clock; the manager and the CLI call it.
 */
export {
  migrateStorage,
  MigrationError,
  type MigrateOptions,
  type MigrationProgress,
  type MigrationResult,
} from "./storage.ts";
