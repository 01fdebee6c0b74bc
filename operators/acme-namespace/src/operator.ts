/**
 * The AcmeNamespace operator's single description of itself: `opkit generate` derives its CRD (with the
 * book's misspelt version served as deprecated), RBAC, webhook configuration and manifests from it, and
 * src/main.ts runs it.
 */
import { defaulter, defineOperator } from "opkit";
import { AcmeNamespace, AcmeNamespaceV1alapha1, DEFAULT_TIER } from "./api/v1alpha1/acmenamespace.ts";
import { billingClient } from "./billing.ts";
import { acmeNamespaceController } from "./controllers/acmenamespace.ts";
import { ADMIN_CLUSTER_ROLE } from "./resources.ts";

/** The mutating webhook: an AcmeNamespace without a tier gets `dev` (the schema defaults it too). */
export const tierDefaulter = defaulter(AcmeNamespace, (obj) => {
  // Typed as always present because the schema defaults it; a request can still arrive without it.
  const spec = obj.spec as { deploymentTier?: string };
  spec.deploymentTier ??= DEFAULT_TIER;
});

export default defineOperator({
  name: "acme-namespace-operator",
  domain: "acme.com",
  kinds: [AcmeNamespace, AcmeNamespaceV1alapha1],
  flags: {
    "billing-url": {
      description:
        "Where deletions are reported (HTTP POST, JSON) before the finalizer is removed. Unset: deletions are not reported.",
      env: "BILLING_URL",
    },
  },
  controllers: [
    ({ flags }) => {
      const url = flags["billing-url"];
      return acmeNamespaceController({
        billing: typeof url === "string" && url !== "" ? billingClient(url) : undefined,
      });
    },
  ],
  extraRules: [
    // The Namespace is created and labelled, never deleted by the operator (garbage collection does it).
    { apiGroups: [""], resources: ["namespaces"], verbs: ["create", "patch"] },
    // Binding the admin to the built-in `admin` ClusterRole needs `bind` on that role only, instead of
    // holding every right the binding grants.
    {
      apiGroups: ["rbac.authorization.k8s.io"],
      resources: ["clusterroles"],
      verbs: ["bind"],
      resourceNames: [ADMIN_CLUSTER_ROLE],
    },
  ],
  webhookCertificates: "cert-manager",
  webhooks: [tierDefaulter],
});
