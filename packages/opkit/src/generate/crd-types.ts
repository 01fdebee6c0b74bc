/**
 * The apiextensions.k8s.io/v1 CustomResourceDefinition shapes, as they travel in JSON. Only what the
 * generator writes and `typesFromCrd` reads.
 */
import type { KubeObject } from "../client/types.ts";

/** OpenAPI v3 schema as the API server accepts it (apiextensions `JSONSchemaProps`). */
export interface JSONSchemaProps {
  /** Shown by `kubectl explain`; the generator carries TypeBox descriptions here. */
  description?: string;
  /**
   * The JSON type of the value; absent only with `x-kubernetes-int-or-string` or
   * `x-kubernetes-preserve-unknown-fields`.
   */
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  /** A format the server validates, e.g. "date-time", "int32", "byte". */
  format?: string;
  /** A short title (rarely used). */
  title?: string;
  /** The value the server fills in when the field is absent (structural schemas only). */
  default?: unknown;
  /** The values the field may take. */
  enum?: unknown[];
  /** Whether null is accepted (and kept) instead of being pruned. */
  nullable?: boolean;
  /** The largest number allowed. */
  maximum?: number;
  /** Whether `maximum` itself is excluded. */
  exclusiveMaximum?: boolean;
  /** The smallest number allowed. */
  minimum?: number;
  /** Whether `minimum` itself is excluded. */
  exclusiveMinimum?: boolean;
  /** Numbers must be a multiple of this. */
  multipleOf?: number;
  /** The longest string allowed; also bounds the CEL cost estimate of rules on the field. */
  maxLength?: number;
  /** The shortest string allowed. */
  minLength?: number;
  /** A regular expression strings must match. */
  pattern?: string;
  /** The most items an array may have; also bounds the CEL cost estimate. */
  maxItems?: number;
  /** The fewest items an array must have. */
  minItems?: number;
  /** The most properties a map may have. */
  maxProperties?: number;
  /** The fewest properties a map must have. */
  minProperties?: number;
  /** Properties that must be present. */
  required?: string[];
  /** The object's declared properties; undeclared ones are pruned unless unknown fields are preserved. */
  properties?: Record<string, JSONSchemaProps>;
  /** The schema of a map's values (a `Record<string, T>`). */
  additionalProperties?: JSONSchemaProps | boolean;
  /** The schema of an array's items. */
  items?: JSONSchemaProps;
  /** The value must match at least one of these (structural schemas allow only validation here, no types). */
  anyOf?: JSONSchemaProps[];
  /** The value must match all of these. */
  allOf?: JSONSchemaProps[];
  /** The value must match exactly one of these. */
  oneOf?: JSONSchemaProps[];
  /** The value must not match this. */
  not?: JSONSchemaProps;
  /** An example value for documentation. */
  example?: unknown;
  /** Keep fields the schema does not declare instead of pruning them. */
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  /** The value is a whole Kubernetes object (apiVersion, kind and metadata are checked). */
  "x-kubernetes-embedded-resource"?: boolean;
  /** The value is a number or a string (e.g. a port or a percentage). */
  "x-kubernetes-int-or-string"?: boolean;
  /**
   * How server-side apply merges the array: replaced whole ("atomic"), as a set, or as a map keyed by
   * `x-kubernetes-list-map-keys`.
   */
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  /**
   * The item fields that identify an item of a "map" list (e.g. ["name"]), so two managers can own different
   * items.
   */
  "x-kubernetes-list-map-keys"?: string[];
  /** How server-side apply merges the object: field by field ("granular") or replaced whole ("atomic"). */
  "x-kubernetes-map-type"?: "granular" | "atomic";
  /** CEL rules the server evaluates on the value. */
  "x-kubernetes-validations"?: ValidationRule[];
}

/**
 * A CEL validation rule of a CRD schema (`x-kubernetes-validations`): checks across fields or against the old
 * object that JSON Schema cannot express.
 */
export interface ValidationRule {
  /** The CEL expression; `self` is the value, `oldSelf` the previous one on updates. */
  rule: string;
  /** What the user sees when the rule fails. */
  message?: string;
  /** A CEL expression that builds the message (may use the values). */
  messageExpression?: string;
  /** The field the failure is reported on, relative to the value, e.g. ".replicas". */
  fieldPath?: string;
  /** The Status reason of the failure, e.g. "FieldValueForbidden". */
  reason?: string;
  /** Evaluate the rule also when there is no old value (creates), with `oldSelf` an optional. */
  optionalOldSelf?: boolean;
}

/** A column `kubectl get` prints for the custom kind (`additionalPrinterColumns`). */
export interface CustomResourceColumnDefinition {
  /** The column header. */
  name: string;
  /** The value type: integer, number, string, boolean or date. */
  type: string;
  /** A simple JSONPath into the object, e.g. ".status.phase". */
  jsonPath: string;
  /** What the column means. */
  description?: string;
  /** 0 shows the column by default; higher only with `-o wide`. */
  priority?: number;
  /** A format hint for the value. */
  format?: string;
}

/**
 * One version of a custom kind in a CRD: whether it is served and stored, its schema, subresources and
 * columns.
 */
export interface CustomResourceDefinitionVersion {
  /** The version's name, e.g. "v1". */
  name: string;
  /** Whether the API server serves this version. */
  served: boolean;
  /** Whether objects are stored in this version; exactly one version has it. */
  storage: boolean;
  /** Whether the server warns clients of this version. */
  deprecated?: boolean;
  /** The warning text for a deprecated version. */
  deprecationWarning?: string;
  /** The version's structural OpenAPI schema: validation, defaulting and pruning follow it. */
  schema?: {
    /** The schema of the whole object (apiVersion, kind, metadata, spec, status). */
    openAPIV3Schema: JSONSchemaProps;
  };
  /** The status subresource (status written separately from spec) and the scale subresource. */
  subresources?: {
    /** Present (empty) to serve `/status`: status is then written only there, spec only on the object. */
    status?: Record<string, never>;
    /** Serve `/scale`, so `kubectl scale` and autoscalers can drive the kind. */
    scale?: {
      /** JSONPath of the desired replicas, e.g. `.spec.replicas`. */
      specReplicasPath: string;
      /** JSONPath of the observed replicas, e.g. `.status.replicas`. */
      statusReplicasPath: string;
      /** JSONPath of the pods' label selector in the status, for the HorizontalPodAutoscaler. */
      labelSelectorPath?: string;
    };
  };
  /** Extra columns for `kubectl get`. */
  additionalPrinterColumns?: CustomResourceColumnDefinition[];
}

/** The spec of a CustomResourceDefinition: the kind's group, names, scope, versions and conversion. */
export interface CustomResourceDefinitionSpec {
  /** The API group of the kind. */
  group: string;
  /** The names kubectl and URLs use: kind, plural, singular, short names, categories. */
  names: {
    /** The kind, e.g. "Memcached". */
    kind: string;
    /** The list kind (default `<kind>List`). */
    listKind?: string;
    /** The lowercase plural used in URLs and RBAC, e.g. "memcacheds". */
    plural: string;
    /** The lowercase singular kubectl accepts. */
    singular?: string;
    /** Abbreviations for kubectl. */
    shortNames?: string[];
    /** Groups the kind joins, e.g. "all". */
    categories?: string[];
  };
  /** Whether objects are namespaced or cluster-scoped; cannot change after creation. */
  scope: "Namespaced" | "Cluster";
  /** Every served version; the first listed is kubectl's preferred one. */
  versions: CustomResourceDefinitionVersion[];
  /** How objects are converted between versions: "None" (only metadata changes) or through a webhook. */
  conversion?: {
    /** "None" when all versions share one schema shape; "Webhook" to call a conversion webhook. */
    strategy: "None" | "Webhook";
    /** Where the conversion webhook is (with strategy "Webhook"). */
    webhook?: Record<string, unknown>;
  };
  /** Legacy (v1beta1) pruning switch; must be false or absent in v1. */
  preserveUnknownFields?: boolean;
}

/**
 * A CustomResourceDefinition as the generator writes it and `typesFromCrd` reads it: installs a custom kind
 * in the API server.
 */
export interface CustomResourceDefinition extends KubeObject {
  /** Always apiextensions.k8s.io/v1. */
  apiVersion: "apiextensions.k8s.io/v1";
  /** Always "CustomResourceDefinition". */
  kind: "CustomResourceDefinition";
  /** The kind's definition. */
  spec: CustomResourceDefinitionSpec;
}
