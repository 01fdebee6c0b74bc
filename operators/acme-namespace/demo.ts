/**
 * `make demo`: the book's AcmeNamespace (`team-x`, namespace `app-y`, admin `sam`, tier dev), applied
 * as written (`tenancy.acme.com/v1alapha1`): converged once it is Created and the Namespace, quota,
 * limits, network policy and admin binding all exist. The demo runs the operator without
 * `--billing-url`: no billing system is part of it, so a deletion is logged as not reported.
 */
import { LimitRanges, Namespaces, NetworkPolicies, ResourceQuotas, RoleBindings } from "opkit";
import { readSample, type DemoEntry } from "../demo/entry.ts";
import { AcmeNamespace } from "./src/api/v1alpha1/acmenamespace.ts";
import operator from "./src/operator.ts";

export const demo: DemoEntry = {
  name: "acme-namespace",
  webhooks: operator.webhooks,
  async apply(ctx) {
    // Cluster-scoped: the sample keeps its own name and namespace.
    await ctx.client.apply(await readSample(ctx, "tenancy_v1alapha1_acmenamespace.yaml", false), {
      force: true,
    });
  },
  async rows({ client }) {
    const name = "team-x";
    const a = await client.getOptional(AcmeNamespace, name);
    const ns = a?.spec.namespaceName ?? "app-y";
    const [namespace, quotas, limits, policies, binding] = await Promise.all([
      client.getOptional(Namespaces, ns),
      client.list(ResourceQuotas, { namespace: ns }).then((l) => l.items),
      client.list(LimitRanges, { namespace: ns }).then((l) => l.items),
      client.list(NetworkPolicies, { namespace: ns }).then((l) => l.items),
      client.getOptional(RoleBindings, "namespace-admin", { namespace: ns }),
    ]);
    const children = [
      namespace && `Namespace ${ns}`,
      ...quotas.map((q) => `ResourceQuota ${q.metadata.name ?? ""}`),
      limits.length > 0 && "LimitRange",
      policies.length > 0 && "NetworkPolicy",
      binding && "RoleBinding",
    ].filter(Boolean);
    const phase = a?.status?.phase;
    return [
      {
        object: `AcmeNamespace ${name}`,
        state: a ? (phase ?? "new") : "not created",
        children: children.join(", ") || "-",
        converged: phase === "Created" && children.length === 5,
        ref: { kind: AcmeNamespace, name },
      },
    ];
  },
};
