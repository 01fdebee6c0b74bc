/**
 * What a `deploymentTier` means, in one table: the resources of the application and database
 * containers, how the database stores its data, and the application's log level. dev is small and
 * ephemeral (an emptyDir: the data lives as long as the database pod); stg and prod keep the data on a
 * PersistentVolumeClaim per database pod, from the cluster's default StorageClass.
 */
import type { Tier } from "./api/v1alpha1/webapp.ts";

/** Requests and limits of one container. */
export interface ContainerResources {
  readonly requests: { readonly cpu: string; readonly memory: string };
  readonly limits: { readonly cpu: string; readonly memory: string };
}

/** How the database keeps its data: an emptyDir of at most `sizeLimit`, or a claim of `size`. */
export type DatabaseStorage =
  | { readonly kind: "ephemeral"; readonly sizeLimit: string }
  | { readonly kind: "persistent"; readonly size: string };

export interface TierSettings {
  readonly app: ContainerResources;
  readonly database: ContainerResources;
  readonly storage: DatabaseStorage;
  /** Written into the application's config file. */
  readonly logLevel: "debug" | "info" | "warn";
}

export const TIER_SETTINGS: Readonly<Record<Tier, TierSettings>> = {
  dev: {
    app: { requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "500m", memory: "256Mi" } },
    database: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "500m", memory: "512Mi" } },
    storage: { kind: "ephemeral", sizeLimit: "1Gi" },
    logLevel: "debug",
  },
  stg: {
    app: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "512Mi" } },
    database: { requests: { cpu: "250m", memory: "256Mi" }, limits: { cpu: "1", memory: "1Gi" } },
    storage: { kind: "persistent", size: "5Gi" },
    logLevel: "info",
  },
  prod: {
    app: { requests: { cpu: "250m", memory: "256Mi" }, limits: { cpu: "2", memory: "1Gi" } },
    database: { requests: { cpu: "500m", memory: "1Gi" }, limits: { cpu: "2", memory: "4Gi" } },
    storage: { kind: "persistent", size: "20Gi" },
    logLevel: "warn",
  },
};
