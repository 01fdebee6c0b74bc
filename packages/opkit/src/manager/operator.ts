/**
 * An operator project's single description of itself — its name, its kinds and its controllers — read
 * by `runOperator` at run time and by `opkit generate` to derive CRDs, RBAC and deployment manifests,
 * so the two can never disagree.
 */
import type { ExtraPolicyRule } from "../client/builtins.ts";
import type { KindRef, KubeObject } from "../client/types.ts";
import type { Controller } from "../controller/controller.ts";
import { DEFAULT_WEBHOOK_PORT, type WebhookHandler } from "../webhook/server.ts";
import { Manager, type ManagerOptions } from "./manager.ts";

export interface OperatorDefinition {
  /** DNS-label name: the Deployment, ServiceAccount, Lease and field manager are named after it. */
  name: string;
  /** The API domain of its kinds (e.g. "example.com"). */
  domain?: string;
  /** Namespace it is deployed to (default `<name>-system`). */
  namespace?: string;
  /** Image for the generated Deployment. */
  image?: string;
  /** The custom kinds it defines (CRDs are generated from them). */
  kinds: readonly KindRef[];
  /** Factories, so that each Manager (tests, `opkit run`) gets fresh controller instances. */
  controllers: readonly (() => Controller<KubeObject>)[];
  /** RBAC rules beyond what the controllers' watches imply (e.g. reading Nodes it never caches). */
  extraRules?: readonly ExtraPolicyRule[];
  /** Restrict caches to one namespace (least privilege: Roles instead of ClusterRoles). */
  watchNamespace?: string;
  /**
   * Admission and conversion webhooks (`validator`, `defaulter`, `conversion`): served by the manager,
   * and `opkit generate` derives the webhook configurations, CRD conversion and Service from them.
   */
  webhooks?: readonly WebhookHandler[];
}

export function defineOperator(def: OperatorDefinition): OperatorDefinition {
  if (!/^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$/.test(def.name)) {
    throw new Error(`operator name "${def.name}" must be a DNS label: lowercase letters, digits and '-'`);
  }
  return def;
}

/**
 * Run an operator as its container does: settings from the environment (KUBECONFIG or in-cluster,
 * POD_NAMESPACE for the Lease, OPKIT_LEADER_ELECT=true for HA, OPKIT_WATCH_NAMESPACE, OPKIT_LOG_LEVEL),
 * metrics on :8080, probes on :8081, until SIGTERM. With webhooks: HTTPS on :9443 (OPKIT_WEBHOOK_PORT,
 * OPKIT_WEBHOOK_HOST) with tls.crt/tls.key from OPKIT_WEBHOOK_CERT_DIR (default
 * /tmp/k8s-webhook-server/serving-certs, where the generated Deployment mounts the certificate Secret).
 */
export async function runOperator(
  def: OperatorDefinition,
  overrides: Partial<ManagerOptions> = {},
): Promise<void> {
  const watchNamespace = process.env.OPKIT_WATCH_NAMESPACE ?? def.watchNamespace;
  const mgr = await Manager.create({
    name: def.name,
    kubeconfig: process.env.KUBECONFIG || undefined,
    leaderElection: process.env.OPKIT_LEADER_ELECT === "true" ? { name: def.name } : false,
    cache: watchNamespace ? { namespace: watchNamespace } : undefined,
    metrics: { host: "0.0.0.0", port: Number(process.env.OPKIT_METRICS_PORT ?? 8080) },
    health: { host: "0.0.0.0", port: Number(process.env.OPKIT_HEALTH_PORT ?? 8081) },
    webhook: def.webhooks?.length
      ? {
          handlers: def.webhooks,
          host: process.env.OPKIT_WEBHOOK_HOST || "0.0.0.0",
          port: Number(process.env.OPKIT_WEBHOOK_PORT ?? DEFAULT_WEBHOOK_PORT),
          certDir: process.env.OPKIT_WEBHOOK_CERT_DIR || undefined,
        }
      : undefined,
    ...overrides,
  });
  for (const make of def.controllers) mgr.add(make());
  await mgr.run();
}
