/**
 * The apiextensions.k8s.io/v1 CustomResourceDefinition shapes, as they travel in JSON. Only what the
 * generator writes and `typesFromCrd` reads.
 */
import type { KubeObject } from "../client/types.ts";

/** OpenAPI v3 schema as the API server accepts it (apiextensions `JSONSchemaProps`). */
export interface JSONSchemaProps {
  description?: string;
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  format?: string;
  title?: string;
  default?: unknown;
  enum?: unknown[];
  nullable?: boolean;
  maximum?: number;
  exclusiveMaximum?: boolean;
  minimum?: number;
  exclusiveMinimum?: boolean;
  multipleOf?: number;
  maxLength?: number;
  minLength?: number;
  pattern?: string;
  maxItems?: number;
  minItems?: number;
  maxProperties?: number;
  minProperties?: number;
  required?: string[];
  properties?: Record<string, JSONSchemaProps>;
  additionalProperties?: JSONSchemaProps | boolean;
  items?: JSONSchemaProps;
  anyOf?: JSONSchemaProps[];
  allOf?: JSONSchemaProps[];
  oneOf?: JSONSchemaProps[];
  not?: JSONSchemaProps;
  example?: unknown;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-embedded-resource"?: boolean;
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "granular" | "atomic";
  "x-kubernetes-validations"?: ValidationRule[];
}

export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  reason?: string;
  optionalOldSelf?: boolean;
}

export interface CustomResourceColumnDefinition {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  priority?: number;
  format?: string;
}

export interface CustomResourceDefinitionVersion {
  name: string;
  served: boolean;
  storage: boolean;
  deprecated?: boolean;
  deprecationWarning?: string;
  schema?: { openAPIV3Schema: JSONSchemaProps };
  subresources?: {
    status?: Record<string, never>;
    scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
  };
  additionalPrinterColumns?: CustomResourceColumnDefinition[];
}

export interface CustomResourceDefinitionSpec {
  group: string;
  names: {
    kind: string;
    listKind?: string;
    plural: string;
    singular?: string;
    shortNames?: string[];
    categories?: string[];
  };
  scope: "Namespaced" | "Cluster";
  versions: CustomResourceDefinitionVersion[];
  conversion?: { strategy: "None" | "Webhook"; webhook?: Record<string, unknown> };
  preserveUnknownFields?: boolean;
}

export interface CustomResourceDefinition extends KubeObject {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  spec: CustomResourceDefinitionSpec;
}
