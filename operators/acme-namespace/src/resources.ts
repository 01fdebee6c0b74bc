/**
 * What an AcmeNamespace wants to exist, as pure functions of its spec (no client, no cache): the
 * Namespace and, inside it, the tier's ResourceQuota, a LimitRange with the tier's container defaults, a
 * NetworkPolicy that admits traffic from the namespace itself only, and the admin's RoleBinding.
 *
 * Admin rights: the seed writes a `namespace-admin` Role with `*` on everything and binds the user to it.
 * An operator may only create a Role granting rights it holds itself (or with `escalate`), so that Role
 * would make the operator all-powerful. Instead the RoleBinding `namespace-admin` binds the user to the
 * built-in `admin` ClusterRole (everything in the namespace except its quota, limits and the namespace
 * itself), for which the operator needs only `bind` on that one ClusterRole.
 */
import type { DeepReadonly, LimitRange, Namespace, NetworkPolicy, ResourceQuota, RoleBinding } from "opkit";
import type { AcmeNamespaceObject, Tier } from "./api/v1alpha1/acmenamespace.ts";

/** The label the seed puts on the Namespace: who administers it. */
export const ADMIN_LABEL = "admin";
export const ROLE_BINDING_NAME = "namespace-admin";
/** The built-in ClusterRole the admin is bound to in the namespace. */
export const ADMIN_CLUSTER_ROLE = "admin";
export const LIMIT_RANGE_NAME = "tier-defaults";
export const NETWORK_POLICY_NAME = "same-namespace-only";

/** A tier's quota (seed 004 gives dev and prod; stg sits between) and its container defaults. */
export interface TierSettings {
  quota: { cpu: string; memory: string; pods: string };
  /** Limits for containers that state none. */
  defaultLimits: { cpu: string; memory: string };
  /** Requests for containers that state none (the quota counts requests, so every pod needs some). */
  defaultRequests: { cpu: string; memory: string };
}

export const TIER_SETTINGS: Readonly<Record<Tier, TierSettings>> = {
  dev: {
    quota: { cpu: "5", memory: "10Gi", pods: "10" },
    defaultLimits: { cpu: "500m", memory: "512Mi" },
    defaultRequests: { cpu: "100m", memory: "128Mi" },
  },
  stg: {
    quota: { cpu: "50", memory: "100Gi", pods: "50" },
    defaultLimits: { cpu: "1", memory: "1Gi" },
    defaultRequests: { cpu: "250m", memory: "256Mi" },
  },
  prod: {
    quota: { cpu: "500", memory: "200Gi", pods: "100" },
    defaultLimits: { cpu: "2", memory: "2Gi" },
    defaultRequests: { cpu: "500m", memory: "512Mi" },
  },
};

type Acme = DeepReadonly<AcmeNamespaceObject>;

/** The Namespace, labelled with its admin (the owner reference is added by the controller). */
export function desiredNamespace(a: Acme): Namespace {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: a.spec.namespaceName, labels: { [ADMIN_LABEL]: a.spec.adminUsername } },
  };
}

/** The children inside the namespace, in the order they are applied. */
export function desiredNamespaceChildren(a: Acme): [ResourceQuota, LimitRange, NetworkPolicy, RoleBinding] {
  const namespace = a.spec.namespaceName;
  const tier = a.spec.deploymentTier;
  const s = TIER_SETTINGS[tier];
  return [
    {
      // Named after the tier, as in the seed: a tier change replaces it (the old one is pruned).
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: tier, namespace },
      spec: { hard: { ...s.quota } },
    },
    {
      apiVersion: "v1",
      kind: "LimitRange",
      metadata: { name: LIMIT_RANGE_NAME, namespace },
      spec: {
        limits: [
          { type: "Container", default: { ...s.defaultLimits }, defaultRequest: { ...s.defaultRequests } },
        ],
      },
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: NETWORK_POLICY_NAME, namespace },
      spec: {
        podSelector: {},
        policyTypes: ["Ingress"],
        ingress: [{ from: [{ podSelector: {} }] }],
      },
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: ROLE_BINDING_NAME, namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: ADMIN_CLUSTER_ROLE },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: a.spec.adminUsername }],
    },
  ];
}
