/**
 * The external billing system of seed 004: before an AcmeNamespace's finalizer is removed, the operator
 * tells billing that the namespace is gone. One HTTP POST with a JSON body; any 2xx answer is success.
 * The AcmeNamespace's UID goes along as `Idempotency-Key`, so a notice repeated after a crash (the POST
 * succeeded, removing the finalizer did not) can be recognised by the billing system.
 */
import type { Tier } from "./api/v1alpha1/acmenamespace.ts";

/** What billing is told when a tenant namespace is deleted. */
export interface BillingNotice {
  event: "NamespaceDeleted";
  /** The AcmeNamespace's name. */
  acmeNamespace: string;
  uid: string;
  namespace: string;
  tier: Tier;
  adminUsername: string;
}

/** Billing did not accept the notice (unreachable, timed out, or answered other than 2xx). */
export class BillingError extends Error {
  /** The HTTP status billing answered, when it answered. */
  readonly status: number | undefined;
  constructor(message: string, opts: { status?: number; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.name = "BillingError";
    this.status = opts.status;
  }
}

/** The `--billing-url` value is not an http(s) URL. */
export class BillingConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BillingConfigError";
  }
}

export interface BillingClient {
  /** Where notices go (for logs and messages). */
  readonly url: string;
  notify(notice: BillingNotice, signal?: AbortSignal): Promise<void>;
}

/** How long one POST may take before it counts as failed. */
export const BILLING_TIMEOUT_MS = 10_000;

/** A client for the billing endpoint at `url` (checked now: a wrong flag fails at start-up). */
export function billingClient(url: string, timeoutMs = BILLING_TIMEOUT_MS): BillingClient {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new BillingConfigError(
      `--billing-url "${url}" is not a URL; give e.g. https://billing.acme.com/v1/notices`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new BillingConfigError(`--billing-url "${url}" must be an http or https URL`);
  const shown = `${parsed.origin}${parsed.pathname}`; // never log credentials or query tokens
  return {
    url: shown,
    async notify(notice, signal) {
      const timeout = AbortSignal.timeout(timeoutMs);
      let res: Response;
      try {
        res = await fetch(parsed, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": notice.uid },
          body: JSON.stringify(notice),
          signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        });
      } catch (err) {
        const why = timeout.aborted
          ? `no answer within ${timeoutMs / 1000}s`
          : String((err as Error).cause ?? err);
        throw new BillingError(`billing at ${shown} is unreachable: ${why}`, { cause: err });
      }
      // Read the body so the connection can be reused, but only a little of it into the message.
      const text = (await res.text().catch(() => "")).slice(0, 200);
      if (!res.ok)
        throw new BillingError(`billing at ${shown} answered ${res.status}${text ? `: ${text}` : ""}`, {
          status: res.status,
        });
    },
  };
}
