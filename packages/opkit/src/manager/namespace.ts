/**
 * Where the manager's Leases (leader election, shards) live when the options do not say: the one place
 * that default is filled in.
 */

/** `explicit`, else the pod's namespace (POD_NAMESPACE, set through the downward API), else "default". */
export function leaseNamespace(explicit: string | undefined): string {
  return explicit ?? process.env.POD_NAMESPACE ?? "default";
}
