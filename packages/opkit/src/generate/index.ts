/**
 * Code generation (the `opkit/generate` entry, controller-gen for opkit): CRDs from kind definitions,
 * TypeScript types from existing CRDs, RBAC and manifests. Build-time only, so operators do not load it.
 * Only what users call is exported; file-writing details stay internal.
 *
 * @module opkit/generate
 */
export type {
  CustomResourceColumnDefinition,
  CustomResourceDefinition,
  CustomResourceDefinitionSpec,
  CustomResourceDefinitionVersion,
  JSONSchemaProps,
  ValidationRule,
} from "./crd-types.ts";
export {
  CLIENT_SIDE_APPLY_LIMIT,
  SchemaError,
  appliedSize,
  crdFor,
  crdYaml,
  crdsFor,
  schemaFor,
  type CrdOptions,
  type CrdSource,
} from "./crd.ts";
export { CrdParseError, crdsFromYaml, typesFromCrd, type TypesFromCrdOptions } from "./types-from-crd.ts";
export {
  RbacGenerationError,
  builtinResolver,
  rbacFor,
  resolverFromClient,
  type ControllerPermission,
  type ControllerPermissions,
  type CustomKindSource,
  type ExtraPolicyRule,
  type KindResolver,
  type PolicyRule,
  type RbacInput,
  type ResolvedKind,
} from "./rbac.ts";
export {
  DEFAULT_RESOURCES,
  ManifestError,
  NONROOT_UID,
  WEBHOOK_CERT_MOUNT,
  WEBHOOK_SECRET_FILE,
  manifestsFor,
  toYaml,
  toYamlStream,
  webhookDnsNames,
  webhookServiceRef,
  writeKustomize,
  type CrdConversionInput,
  type EnvVar,
  type ManifestsInput,
  type OperatorPorts,
  type ResourceRequirements,
  type WebhookCertificates,
  type WebhookClientConfig,
  type WebhookManifestsInput,
} from "./manifests.ts";
export { HelmChartError, writeHelmChart, type HelmChartInput, type HelmValues } from "./helm.ts";
export {
  DockerfileError,
  OPERATOR_NODE_FLAGS,
  dockerfile,
  dockerignore,
  type DockerfileOptions,
} from "./dockerfile.ts";
export {
  BUILTIN_API_DOCUMENTS,
  BuiltinSchemaError,
  MODELS_DIR,
  SCHEMAS_DIR,
  builtinSchemaFiles,
  fetchBuiltinOpenApi,
  type BuiltinSchemaOptions,
  type OpenApiDocument,
} from "./builtin-schemas.ts";
export {
  grafanaDashboard,
  monitoringFiles,
  prometheusRule,
  type MonitoringInput,
  type PrometheusRuleObject,
} from "./monitoring.ts";
export {
  checkCompatibility,
  CompatConfigError,
  crdName,
  formatFinding,
  type AllowedBreak,
  type CompatFinding,
  type CompatOptions,
  type CompatReport,
  type CompatRule,
} from "./compat.ts";
