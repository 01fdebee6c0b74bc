/**
 * webhook — admission and conversion webhooks for an operator's kinds: typed handlers (`validator`,
 * `defaulter`, `conversion`), the HTTPS server that serves them (TLS 1.2+, certificate reloaded from
 * disk, request limits and timeouts, controller-runtime's metrics), the webhook configurations derived
 * from the handlers, and local development with a generated certificate (`LocalWebhooks`,
 * `startLocalWebhooks`).
 *
 * It knows kinds (api), the client (to register configurations), pki (certificates), clock, logging and
 * metrics; it knows nothing of controllers or the manager, which starts the server when an operator
 * has webhooks.
 */
export {
  allow,
  defaulter,
  deny,
  denyIssues,
  jsonPatch,
  validator,
  verdictOfError,
  responseOf,
  ValidationError,
  WebhookDefinitionError,
  type AdmissionContext,
  type AdmissionWebhook,
  type AdmitOptions,
  type Defaulter,
  type DefaulterOptions,
  type FailurePolicy,
  type PatchOperation,
  type SideEffects,
  type Validator,
  type ValidatorFunctions,
  type Verdict,
  type WebhookKind,
  type WebhookLabelSelector,
  type WebhookOptions,
} from "./admission.ts";
export {
  conversion,
  roundTrip,
  ConversionError,
  type ConversionDefinition,
  type ConversionKind,
  type ConversionWebhook,
  type Converted,
  type SpokeDefinition,
} from "./conversion.ts";
export { preservedAnnotation, PRESERVED_ANNOTATION_PREFIX } from "./preserve.ts";
export {
  ADMISSION_API_VERSION,
  CONVERSION_API_VERSION,
  MalformedReviewError,
  decodeAdmissionReview,
  decodeConversionReview,
  type AdmissionRequest,
  type AdmissionResponse,
  type AdmissionReview,
  type AdmissionStatus,
  type ConversionRequest,
  type ConversionResponse,
  type ConversionReview,
  type GroupVersionKind,
  type GroupVersionResource,
  type Operation,
  type AdmissionStatusCause,
  type UserInfo,
} from "./review.ts";
export {
  CA_FILE,
  CERT_FILE,
  KEY_FILE,
  DEFAULT_CERT_DIR,
  CertificateError,
  CertificateFiles,
  writeServingCertificate,
  ensureServingCertificate,
  type CertificatePem,
  type KeyPair,
  type ServingCertificate,
  type ServingCertificateOptions,
} from "./certs.ts";
export {
  DEFAULT_MAX_CONVERSION_BYTES,
  DEFAULT_MAX_REQUEST_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_WEBHOOK_PORT,
  WebhookServer,
  WebhookServerConfigError,
  type WebhookCheckResult,
  type WebhookHandler,
  type WebhookServerOptions,
} from "./server.ts";
export {
  clientConfigFor,
  webhookConfigurations,
  type CrdConversion,
  type WebhookClientConfig,
  type WebhookConfigurationOptions,
  type WebhookConfigurations,
  type WebhookTarget,
} from "./configuration.ts";
export {
  freePort,
  startLocalWebhooks,
  LocalWebhooks,
  LocalWebhookError,
  LOCAL_WEBHOOKS_FIELD_MANAGER,
  type LocalWebhooksOptions,
  type RunningLocalWebhooks,
  type StartLocalWebhooksOptions,
} from "./local.ts";
