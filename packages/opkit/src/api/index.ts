/**
 * Kind definitions: `defineKind` declares a custom kind once (its TypeScript type, `KindRef`, runtime
 * validation and CRD settings); the helpers in k8s.ts add what Kubernetes schemas know beyond JSON
 * Schema (int-or-string, list/map types, CEL rules, ...). TypeBox builds the schemas.
 */

export {
  KindDefinitionError,
  defaultPlural,
  defineKind,
  defineKindVersions,
  type KindDefinition,
  type KindObject,
  type KindOptions,
  type KindVersions,
  type NewObjectOptions,
  type ObjectOf,
  type PrinterColumn,
  type PrinterColumnType,
  type ScaleSubresource,
  type ValidationIssue,
} from "./kind.ts";
export {
  QUANTITY_PATTERN,
  cel,
  conditions,
  embeddedResource,
  intOrString,
  listType,
  mapType,
  nullable,
  preserveUnknownFields,
  quantity,
  stringEnum,
  withoutDescriptions,
  type CelRule,
  type EmbeddedObject,
  type IntOrString,
} from "./k8s.ts";
