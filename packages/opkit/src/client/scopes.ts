/**
 * What this process knows about kinds without asking the server: their plural resource name and
 * whether they are namespaced, for the built-in kinds, every kind defined with `defineKind`, and every
 * kind discovery has reported. Synchronous code (owner references, the cache's namespace scoping,
 * offline RBAC generation) reads it; the REST mapper remains the authority when an answer may be awaited.
 */
import { groupKindKey, type KindRef } from "./types.ts";

/**
 * Whether a kind's objects live in a namespace ("Namespaced") or cluster-wide ("Cluster"); decides URL paths,
 * owner references and RBAC roles.
 */
export type KindScope = "Namespaced" | "Cluster";

/** A kind's resource name and scope. */
export interface KnownKind {
  /** Plural resource name, e.g. "deployments". */
  resource: string;
  /** Whether the kind is namespaced or cluster-scoped. */
  scope: KindScope;
}

const N: KindScope = "Namespaced";
const C: KindScope = "Cluster";

/** Built-in kinds by `group/Kind` (the core group is ""). */
const BUILTIN: Record<string, [string, KindScope]> = {
  "/Pod": ["pods", N],
  "/Service": ["services", N],
  "/ConfigMap": ["configmaps", N],
  "/Secret": ["secrets", N],
  "/ServiceAccount": ["serviceaccounts", N],
  "/PersistentVolumeClaim": ["persistentvolumeclaims", N],
  "/Endpoints": ["endpoints", N],
  "/Event": ["events", N],
  "/LimitRange": ["limitranges", N],
  "/ResourceQuota": ["resourcequotas", N],
  "/ReplicationController": ["replicationcontrollers", N],
  "/PodTemplate": ["podtemplates", N],
  "/Binding": ["bindings", N],
  "/Namespace": ["namespaces", C],
  "/Node": ["nodes", C],
  "/PersistentVolume": ["persistentvolumes", C],
  "/ComponentStatus": ["componentstatuses", C],
  "apps/Deployment": ["deployments", N],
  "apps/StatefulSet": ["statefulsets", N],
  "apps/DaemonSet": ["daemonsets", N],
  "apps/ReplicaSet": ["replicasets", N],
  "apps/ControllerRevision": ["controllerrevisions", N],
  "batch/Job": ["jobs", N],
  "batch/CronJob": ["cronjobs", N],
  "autoscaling/HorizontalPodAutoscaler": ["horizontalpodautoscalers", N],
  "policy/PodDisruptionBudget": ["poddisruptionbudgets", N],
  "networking.k8s.io/Ingress": ["ingresses", N],
  "networking.k8s.io/NetworkPolicy": ["networkpolicies", N],
  "networking.k8s.io/IngressClass": ["ingressclasses", C],
  "networking.k8s.io/IPAddress": ["ipaddresses", C],
  "networking.k8s.io/ServiceCIDR": ["servicecidrs", C],
  "discovery.k8s.io/EndpointSlice": ["endpointslices", N],
  "events.k8s.io/Event": ["events", N],
  "coordination.k8s.io/Lease": ["leases", N],
  "rbac.authorization.k8s.io/Role": ["roles", N],
  "rbac.authorization.k8s.io/RoleBinding": ["rolebindings", N],
  "rbac.authorization.k8s.io/ClusterRole": ["clusterroles", C],
  "rbac.authorization.k8s.io/ClusterRoleBinding": ["clusterrolebindings", C],
  "storage.k8s.io/StorageClass": ["storageclasses", C],
  "storage.k8s.io/CSIDriver": ["csidrivers", C],
  "storage.k8s.io/CSINode": ["csinodes", C],
  "storage.k8s.io/VolumeAttachment": ["volumeattachments", C],
  "storage.k8s.io/CSIStorageCapacity": ["csistoragecapacities", N],
  "scheduling.k8s.io/PriorityClass": ["priorityclasses", C],
  "node.k8s.io/RuntimeClass": ["runtimeclasses", C],
  "apiextensions.k8s.io/CustomResourceDefinition": ["customresourcedefinitions", C],
  "apiregistration.k8s.io/APIService": ["apiservices", C],
  "admissionregistration.k8s.io/MutatingWebhookConfiguration": ["mutatingwebhookconfigurations", C],
  "admissionregistration.k8s.io/ValidatingWebhookConfiguration": ["validatingwebhookconfigurations", C],
  "admissionregistration.k8s.io/ValidatingAdmissionPolicy": ["validatingadmissionpolicies", C],
  "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": ["validatingadmissionpolicybindings", C],
  "certificates.k8s.io/CertificateSigningRequest": ["certificatesigningrequests", C],
  "flowcontrol.apiserver.k8s.io/FlowSchema": ["flowschemas", C],
  "flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration": ["prioritylevelconfigurations", C],
};

const known = new Map<string, KnownKind>(
  Object.entries(BUILTIN).map(([key, [resource, scope]]) => [key, { resource, scope }]),
);

/** A kind's resource and scope if this process knows it (built-in, defined or discovered), else undefined. */
export function knownKind(kind: Pick<KindRef, "apiVersion" | "kind">): KnownKind | undefined {
  return known.get(groupKindKey(kind));
}

/** The scope of a kind if known (see `knownKind`). */
export function kindScope(kind: Pick<KindRef, "apiVersion" | "kind">): KindScope | undefined {
  return known.get(groupKindKey(kind))?.scope;
}

/** Record a kind (defineKind and discovery call this; a group/kind's resource and scope never vary by version). */
export function registerKind(kind: Pick<KindRef, "apiVersion" | "kind">, facts: KnownKind): void {
  known.set(groupKindKey(kind), { ...facts });
}
