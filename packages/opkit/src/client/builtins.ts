/**
 * Typed references for the built-in kinds, with the object types of @kubernetes/client-node's models
 * as they travel in JSON. The models describe deserialized objects (timestamps as Date); opkit passes
 * the API's JSON through unchanged, so `Wire<T>` maps every Date to the RFC 3339 string it is on the wire.
 */
import type {
  V1ConfigMap,
  V1CronJob,
  V1DaemonSet,
  V1Deployment,
  CoreV1Event,
  V1Ingress,
  V1Job,
  V1Lease,
  V1LimitRange,
  V1Namespace,
  V1NetworkPolicy,
  V1Node,
  V1PersistentVolumeClaim,
  V1Pod,
  V1ReplicaSet,
  V1ResourceQuota,
  V1Role,
  V1RoleBinding,
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1Secret,
  V1Service,
  V1ServiceAccount,
  V1StatefulSet,
  V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import { kindRef, type KindRef, type ObjectMeta } from "./types.ts";

/** A model type as JSON: Dates become strings, recursively. */
export type Wire<T> = T extends Date
  ? string
  : T extends (infer U)[]
    ? Wire<U>[]
    : T extends object
      ? { [K in keyof T]: Wire<T[K]> }
      : T;

/** A built-in object as opkit's client returns it (metadata always present). */
export type Builtin<T extends { metadata?: unknown }> = Omit<Wire<T>, "metadata"> & { metadata: ObjectMeta };

export type ConfigMap = Builtin<V1ConfigMap>;
export type Secret = Builtin<V1Secret>;
export type Pod = Builtin<V1Pod>;
export type Service = Builtin<V1Service>;
export type ServiceAccount = Builtin<V1ServiceAccount>;
export type Namespace = Builtin<V1Namespace>;
export type Node = Builtin<V1Node>;
export type PersistentVolumeClaim = Builtin<V1PersistentVolumeClaim>;
export type ResourceQuota = Builtin<V1ResourceQuota>;
export type LimitRange = Builtin<V1LimitRange>;
export type CoreEvent = Builtin<CoreV1Event>;
export type Deployment = Builtin<V1Deployment>;
export type ReplicaSet = Builtin<V1ReplicaSet>;
export type StatefulSet = Builtin<V1StatefulSet>;
export type DaemonSet = Builtin<V1DaemonSet>;
export type Job = Builtin<V1Job>;
export type CronJob = Builtin<V1CronJob>;
export type Ingress = Builtin<V1Ingress>;
export type NetworkPolicy = Builtin<V1NetworkPolicy>;
export type Role = Builtin<V1Role>;
export type RoleBinding = Builtin<V1RoleBinding>;
export type ClusterRole = Builtin<V1ClusterRole>;
export type ClusterRoleBinding = Builtin<V1ClusterRoleBinding>;
export type Lease = Builtin<V1Lease>;
export type CustomResourceDefinition = Builtin<V1CustomResourceDefinition>;

export const ConfigMaps: KindRef<ConfigMap> = kindRef("v1", "ConfigMap");
export const Secrets: KindRef<Secret> = kindRef("v1", "Secret");
export const Pods: KindRef<Pod> = kindRef("v1", "Pod");
export const Services: KindRef<Service> = kindRef("v1", "Service");
export const ServiceAccounts: KindRef<ServiceAccount> = kindRef("v1", "ServiceAccount");
export const Namespaces: KindRef<Namespace> = kindRef("v1", "Namespace");
export const Nodes: KindRef<Node> = kindRef("v1", "Node");
export const PersistentVolumeClaims: KindRef<PersistentVolumeClaim> = kindRef("v1", "PersistentVolumeClaim");
export const ResourceQuotas: KindRef<ResourceQuota> = kindRef("v1", "ResourceQuota");
export const LimitRanges: KindRef<LimitRange> = kindRef("v1", "LimitRange");
export const CoreEvents: KindRef<CoreEvent> = kindRef("v1", "Event");
export const Deployments: KindRef<Deployment> = kindRef("apps/v1", "Deployment");
export const ReplicaSets: KindRef<ReplicaSet> = kindRef("apps/v1", "ReplicaSet");
export const StatefulSets: KindRef<StatefulSet> = kindRef("apps/v1", "StatefulSet");
export const DaemonSets: KindRef<DaemonSet> = kindRef("apps/v1", "DaemonSet");
export const Jobs: KindRef<Job> = kindRef("batch/v1", "Job");
export const CronJobs: KindRef<CronJob> = kindRef("batch/v1", "CronJob");
export const Ingresses: KindRef<Ingress> = kindRef("networking.k8s.io/v1", "Ingress");
export const NetworkPolicies: KindRef<NetworkPolicy> = kindRef("networking.k8s.io/v1", "NetworkPolicy");
export const Roles: KindRef<Role> = kindRef("rbac.authorization.k8s.io/v1", "Role");
export const RoleBindings: KindRef<RoleBinding> = kindRef("rbac.authorization.k8s.io/v1", "RoleBinding");
export const ClusterRoles: KindRef<ClusterRole> = kindRef("rbac.authorization.k8s.io/v1", "ClusterRole");
export const ClusterRoleBindings: KindRef<ClusterRoleBinding> = kindRef(
  "rbac.authorization.k8s.io/v1",
  "ClusterRoleBinding",
);
export const Leases: KindRef<Lease> = kindRef("coordination.k8s.io/v1", "Lease");
export const CustomResourceDefinitions: KindRef<CustomResourceDefinition> = kindRef(
  "apiextensions.k8s.io/v1",
  "CustomResourceDefinition",
);

/** An rbac.authorization.k8s.io/v1 PolicyRule. */
export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/**
 * An RBAC rule an operator needs beyond what its watches imply, with an optional scope hint. Extra rules
 * name resources, not kinds, so their scope is unknown: without `namespaced: true` they go into the
 * ClusterRole (the safe default for e.g. Nodes).
 */
export interface ExtraPolicyRule extends PolicyRule {
  namespaced?: boolean;
}
