/**
 * Run code as an operator's ServiceAccount with nothing but the RBAC it was generated with: the
 * ServiceAccount, (Cluster)Roles and bindings from its generated manifests are created for a test
 * namespace, and a kubeconfig is written that keeps the admin's credentials but impersonates the
 * ServiceAccount, so every request the operator makes is authorized exactly as in the cluster it ships to.
 *
 * Objects are renamed for the test (cluster-scoped roles get the namespace as suffix, the ServiceAccount
 * and the operator's own namespace become the test namespace), so operators tested in parallel on one
 * shared control plane never share or overwrite each other's permissions.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";
import { NotFoundError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import type { TestEnv } from "./testing.ts";

const RBAC_KINDS = new Set(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]);

/**
 * A ServiceAccount with RBAC applied from manifests, and a kubeconfig that acts as it: run code under exactly
 * the permissions an operator will have in production.
 */
export interface ServiceAccountSession {
  /** `system:serviceaccount:<namespace>:<name>` */
  readonly user: string;
  /** The ServiceAccount's namespace. */
  readonly namespace: string;
  /** The ServiceAccount's name. */
  readonly name: string;
  /** A kubeconfig acting as the ServiceAccount (pass it to the operator as --kubeconfig). */
  readonly kubeconfigPath: string;
  /** The objects created, as created (for assertions). */
  readonly objects: readonly KubeObject[];
  /** Delete the cluster-scoped objects and the kubeconfig (the namespaced ones go with the namespace). */
  cleanup(): Promise<void>;
}

/** A generated manifest file (multi-document YAML) as objects; empty documents are skipped. */
export async function readManifests(file: string): Promise<KubeObject[]> {
  return parseAllDocuments(await readFile(file, "utf8"))
    .map((d) => d.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null && typeof o === "object");
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}
interface RoleRef {
  kind: string;
  name: string;
}

/**
 * Create the ServiceAccount and RBAC objects among `manifests` (other kinds are ignored) for
 * `namespace`, and return a kubeconfig that impersonates the ServiceAccount. The ServiceAccount is the
 * one the bindings name (there must be exactly one).
 */
export async function impersonateServiceAccount(
  env: TestEnv,
  manifests: readonly KubeObject[],
  namespace: string,
): Promise<ServiceAccountSession> {
  const rbac = manifests.filter((o) => o.kind && RBAC_KINDS.has(o.kind));
  const subjects = new Map<string, Subject>();
  for (const o of rbac)
    for (const s of ((o as { subjects?: Subject[] }).subjects ?? []).filter(
      (x) => x.kind === "ServiceAccount",
    ))
      subjects.set(`${s.namespace}/${s.name}`, s);
  const [sa, ...others] = [...subjects.values()];
  if (!sa || others.length > 0)
    throw new Error(
      `impersonateServiceAccount: the manifests must bind exactly one ServiceAccount, found ${subjects.size} (${[...subjects.keys()].join(", ")})`,
    );
  const home = sa.namespace ?? "";
  const renamed = (name: string) => `${name}-${namespace}`.slice(0, 253);
  const objects: KubeObject[] = [];
  const hasSa = rbac.some((o) => o.kind === "ServiceAccount" && o.metadata.name === sa.name);
  if (!hasSa)
    objects.push({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: sa.name, namespace } });
  for (const original of rbac) {
    const o = structuredClone(original) as KubeObject & { subjects?: Subject[]; roleRef?: RoleRef };
    o.metadata.labels = { ...o.metadata.labels, "opkit.dev/test-namespace": namespace };
    if (o.kind === "ClusterRole" || o.kind === "ClusterRoleBinding")
      o.metadata.name = renamed(o.metadata.name ?? "");
    else if (o.metadata.namespace === home || o.kind === "ServiceAccount") o.metadata.namespace = namespace;
    if (o.roleRef?.kind === "ClusterRole") o.roleRef.name = renamed(o.roleRef.name);
    for (const s of o.subjects ?? [])
      if (s.kind === "ServiceAccount" && s.name === sa.name && s.namespace === home) s.namespace = namespace;
    objects.push(o);
  }
  const created: KubeObject[] = [];
  for (const o of objects) created.push(await env.client.apply(o, { force: true }));

  const user = `system:serviceaccount:${namespace}:${sa.name}`;
  const dir = await mkdtemp(join(tmpdir(), "opkit-sa-"));
  const kc = parse(await readFile(env.kubeconfigPath, "utf8")) as {
    users: { user: Record<string, unknown> }[];
  };
  // client-node turns the user's `as` into the Impersonate-User header; the admin may impersonate.
  for (const u of kc.users) u.user.as = user;
  const kubeconfigPath = join(dir, "kubeconfig");
  await writeFile(kubeconfigPath, stringify(kc), { mode: 0o600 });

  return {
    user,
    namespace,
    name: sa.name,
    kubeconfigPath,
    objects: created,
    async cleanup() {
      for (const o of created.filter((x) => x.kind === "ClusterRoleBinding" || x.kind === "ClusterRole")) {
        try {
          await env.client.delete(kindRef(o.apiVersion ?? "", o.kind ?? ""), o.metadata.name ?? "");
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
        }
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
