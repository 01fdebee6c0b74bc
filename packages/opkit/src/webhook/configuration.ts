/**
 * Webhook configurations derived from the handlers, so the paths, rules and policies the API server is
 * told about are the ones the server serves: a ValidatingWebhookConfiguration and a
 * MutatingWebhookConfiguration (one webhook entry per handler) and, per multi-version kind with a
 * conversion handler, the CRD's `spec.conversion`.
 *
 * Where the API server reaches the server is the caller's choice: a Service in the cluster (the
 * generated manifests) or a URL (local development, tests). Pure and deterministic.
 */
import type { WebhookClientConfig } from "../client/models/apiextensions/v1.ts";
import type { KubeObject } from "../client/types.ts";
import type { AdmissionWebhook } from "./admission.ts";
import { WebhookDefinitionError } from "./admission.ts";
import type { WebhookHandler } from "./server.ts";

/** Where the API server sends webhook requests. `caBundle` is the PEM of the CA that signed the server's certificate. */
export type WebhookTarget =
  | {
      /** An https base URL; each webhook's path is appended. */
      url: string;
      /** The PEM of the CA that signed the server's certificate. */
      caBundle?: string;
    }
  | {
      /** The in-cluster Service in front of the webhook server. */
      service: {
        /** The Service's name. */
        name: string;
        /** The Service's namespace. */
        namespace: string;
        /** The Service port (default 443). */
        port?: number;
      };
      /** The PEM of the CA that signed the server's certificate. */
      caBundle?: string;
    };

/**
 * `clientConfig` of a webhook entry or a CRD conversion webhook: the built-in model (admissionregistration
 * and apiextensions declare the same shape), one type for the configurations and the generated manifests.
 */
export type { WebhookClientConfig };

/** A CRD's `spec.conversion` for the Webhook strategy. */
export interface CrdConversion {
  /** Always "Webhook": the API server calls the conversion webhook. */
  strategy: "Webhook";
  /** Where the conversion webhook is and which review version it speaks. */
  webhook: {
    /** How the API server reaches the conversion webhook. */
    clientConfig: WebhookClientConfig;
    /** ConversionReview v1 only. */
    conversionReviewVersions: ["v1"];
  };
}

/**
 * The objects that register an operator's webhooks with the API server: the validating and mutating
 * configurations and each CRD's conversion setting.
 */
export interface WebhookConfigurations {
  /** Absent when no handler validates. */
  validating?: KubeObject;
  /** Absent when no handler defaults. */
  mutating?: KubeObject;
  /** One per kind with a conversion handler: the CRD name and the `spec.conversion` to set on it. */
  conversions: {
    /** The CRD's name, `<plural>.<group>`. */
    crdName: string;
    /** The `spec.conversion` to set on it. */
    conversion: CrdConversion;
  }[];
}

/** Options of `webhookConfigurations`: the objects' name, where the server runs and extra metadata. */
export interface WebhookConfigurationOptions {
  /** Name of both configuration objects (usually the operator's name). */
  name: string;
  /** Where the API server reaches the webhook server (a URL or a Service) and the CA that signed it. */
  target: WebhookTarget;
  /** Labels for the configuration objects. */
  labels?: Record<string, string>;
  /** Annotations for the configuration objects, e.g. cert-manager's inject-ca-from. */
  annotations?: Record<string, string>;
}

/** The clientConfig for one path of a target. */
export function clientConfigFor(target: WebhookTarget, path: string): WebhookClientConfig {
  const out: WebhookClientConfig = {};
  if ("url" in target) {
    const base = target.url.replace(/\/+$/, "");
    if (!base.startsWith("https://"))
      throw new WebhookDefinitionError(
        `webhook URL ${target.url} must start with https:// (the API server calls webhooks over TLS only)`,
      );
    out.url = `${base}${path}`;
  } else {
    out.service = {
      name: target.service.name,
      namespace: target.service.namespace,
      path,
      port: target.service.port ?? 443,
    };
  }
  if (target.caBundle) out.caBundle = Buffer.from(target.caBundle).toString("base64");
  return out;
}

function entry(h: AdmissionWebhook, target: WebhookTarget): Record<string, unknown> {
  const k = h.kind;
  const e: Record<string, unknown> = {
    name: h.name,
    admissionReviewVersions: ["v1"],
    clientConfig: clientConfigFor(target, h.path),
    rules: [
      {
        apiGroups: [k.group],
        apiVersions: [k.version],
        resources: [k.plural],
        operations: [...h.operations],
        scope: k.scope ?? "*",
      },
    ],
    // Requests for other versions of the kind are converted to this version and sent too, so a
    // validation cannot be bypassed by writing through an older API version.
    matchPolicy: "Equivalent",
    failurePolicy: h.failurePolicy,
    sideEffects: h.sideEffects,
    timeoutSeconds: h.timeoutSeconds,
  };
  if (h.namespaceSelector) e.namespaceSelector = structuredClone(h.namespaceSelector);
  if (h.objectSelector) e.objectSelector = structuredClone(h.objectSelector);
  if (h.type === "mutating") e.reinvocationPolicy = "Never";
  return e;
}

/** The configurations for `handlers`, pointing at `target`. Throws on duplicate names or paths. */
export function webhookConfigurations(
  handlers: readonly WebhookHandler[],
  options: WebhookConfigurationOptions,
): WebhookConfigurations {
  const names = new Set<string>();
  const paths = new Set<string>();
  const validating: Record<string, unknown>[] = [];
  const mutating: Record<string, unknown>[] = [];
  const conversions: WebhookConfigurations["conversions"] = [];
  for (const h of handlers) {
    if (paths.has(h.path))
      throw new WebhookDefinitionError(`two webhooks use path ${h.path}; give one a different path`);
    paths.add(h.path);
    if (h.type === "conversion") {
      if (conversions.some((c) => c.crdName === h.crdName))
        throw new WebhookDefinitionError(`two conversion webhooks for ${h.crdName}; a kind has one`);
      conversions.push({
        crdName: h.crdName,
        conversion: {
          strategy: "Webhook",
          webhook: {
            clientConfig: clientConfigFor(options.target, h.path),
            conversionReviewVersions: ["v1"],
          },
        },
      });
      continue;
    }
    if (names.has(h.name))
      throw new WebhookDefinitionError(`two webhooks are named ${h.name}; pass a distinct name option`);
    names.add(h.name);
    (h.type === "validating" ? validating : mutating).push(entry(h, options.target));
  }
  const byName = (a: Record<string, unknown>, b: Record<string, unknown>): number =>
    String(a.name) < String(b.name) ? -1 : String(a.name) > String(b.name) ? 1 : 0;
  const metadata = (): KubeObject["metadata"] => {
    const m: KubeObject["metadata"] = { name: options.name };
    if (options.labels) m.labels = { ...options.labels };
    if (options.annotations) m.annotations = { ...options.annotations };
    return m;
  };
  const out: WebhookConfigurations = {
    conversions: conversions.sort((a, b) => (a.crdName < b.crdName ? -1 : a.crdName > b.crdName ? 1 : 0)),
  };
  if (validating.length)
    out.validating = {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: metadata(),
      webhooks: validating.sort(byName),
    } as KubeObject;
  if (mutating.length)
    out.mutating = {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingWebhookConfiguration",
      metadata: metadata(),
      webhooks: mutating.sort(byName),
    } as KubeObject;
  return out;
}
