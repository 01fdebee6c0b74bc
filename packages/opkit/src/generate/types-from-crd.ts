/**
 * TypeScript types from an existing CRD (for third-party kinds such as cert-manager's Certificate):
 * per served version an interface for spec and status, the object type, and a `KindRef` constant.
 */
import { parseAllDocuments } from "yaml";
import type { CustomResourceDefinition, JSONSchemaProps } from "./crd-types.ts";

/** Options of `typesFromCrd`. */
export interface TypesFromCrdOptions {
  /** Where `kindRef` and `KubeObject` are imported from; "opkit" by default. */
  importFrom?: string;
}

/** A CRD document that cannot be turned into types; the message says which field is missing. */
export class CrdParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CrdParseError";
  }
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

function pascal(text: string): string {
  return text
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join("");
}

function docComment(text: string | undefined, indent: string): string {
  if (!text) return "";
  // "*/" would end the comment early.
  const lines = text.trim().replace(/\*\//g, "*\\/").split("\n");
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} *${l ? ` ${l}` : ""}`).join("\n")}\n${indent} */\n`;
}

function literal(value: unknown): string {
  return JSON.stringify(value);
}

/** The TypeScript type of one schema node; nested objects become inline object types. */
function typeOf(schema: JSONSchemaProps | undefined, indent: string): string {
  if (!schema) return "unknown";
  const base = baseType(schema, indent);
  return schema.nullable ? `${base} | null` : base;
}

function baseType(schema: JSONSchemaProps, indent: string): string {
  if (schema["x-kubernetes-int-or-string"]) return "number | string";
  if (schema.enum && schema.enum.length > 0) return schema.enum.map(literal).join(" | ");
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "array": {
      const item = typeOf(schema.items, indent);
      return /[|&]/.test(item) && !item.startsWith("{") ? `(${item})[]` : `${item}[]`;
    }
    case "object":
      return objectType(schema, indent);
    default:
      if (schema.properties) return objectType(schema, indent);
      return "unknown";
  }
}

function objectType(schema: JSONSchemaProps, indent: string): string {
  const props = schema.properties ?? {};
  const names = Object.keys(props);
  const preserve = schema["x-kubernetes-preserve-unknown-fields"] === true;
  const additional = schema.additionalProperties;
  if (names.length === 0) {
    if (typeof additional === "object") return `Record<string, ${typeOf(additional, indent)}>`;
    if (preserve || additional === true || schema["x-kubernetes-embedded-resource"])
      return "Record<string, unknown>";
    return "Record<string, never>";
  }
  return `{\n${members(schema, `${indent}  `)}${indent}}`;
}

function members(schema: JSONSchemaProps, indent: string): string {
  const required = new Set(schema.required ?? []);
  let out = "";
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    const key = IDENTIFIER.test(name) ? name : JSON.stringify(name);
    out += docComment(child.description, indent);
    out += `${indent}${key}${required.has(name) ? "" : "?"}: ${typeOf(child, indent)};\n`;
  }
  if (schema["x-kubernetes-preserve-unknown-fields"] === true || schema.additionalProperties === true)
    out += `${indent}[field: string]: unknown;\n`;
  return out;
}

function interfaceFor(name: string, schema: JSONSchemaProps | undefined): string {
  if (!schema) return `export type ${name} = Record<string, unknown>;\n`;
  const type = typeOf(schema, "");
  const doc = docComment(schema.description, "");
  if (type.startsWith("{") && !schema.nullable) return `${doc}export interface ${name} ${type}\n`;
  return `${doc}export type ${name} = ${type};\n`;
}

function isCrd(doc: unknown): doc is CustomResourceDefinition {
  return (
    typeof doc === "object" &&
    doc !== null &&
    (doc as { kind?: unknown }).kind === "CustomResourceDefinition" &&
    typeof (doc as { spec?: unknown }).spec === "object"
  );
}

/**
 * The CustomResourceDefinitions among the YAML documents of `crdYamlText` (other documents are skipped).
 * Invalid YAML, or no CRD at all, is a `CrdParseError`.
 */
export function crdsFromYaml(crdYamlText: string): CustomResourceDefinition[] {
  const crds: CustomResourceDefinition[] = [];
  for (const doc of parseAllDocuments(crdYamlText)) {
    if (doc.errors.length > 0)
      throw new CrdParseError(`typesFromCrd: invalid YAML: ${doc.errors[0]?.message ?? ""}`);
    const value: unknown = doc.toJS();
    if (isCrd(value)) crds.push(value);
  }
  if (crds.length === 0)
    throw new CrdParseError(
      "typesFromCrd: no CustomResourceDefinition found; pass the CRD YAML (kind: CustomResourceDefinition)",
    );
  return crds;
}

/**
 * TypeScript source for every CRD in `crdYamlText` (one or more YAML documents). Each version gives
 * `<Kind><Version>Spec`, `<Kind><Version>Status`, the object interface `<Kind><Version>` and a
 * `KindRef` constant of the same name, ready for `client.get(CertificateV1, name)`.
 */
export function typesFromCrd(crdYamlText: string, options: TypesFromCrdOptions = {}): string {
  const crds = crdsFromYaml(crdYamlText);
  let out = `// Generated by opkit from ${crds.map((c) => c.metadata.name ?? c.spec.names.kind).join(", ")}. Do not edit.\n`;
  out += `import { kindRef, type KubeObject } from ${JSON.stringify(options.importFrom ?? "opkit")};\n`;
  for (const crd of crds) {
    const kind = crd.spec.names?.kind;
    const group = crd.spec.group;
    if (!kind || typeof group !== "string")
      throw new CrdParseError(
        `typesFromCrd: CRD ${crd.metadata?.name ?? "?"} lacks spec.names.kind or spec.group`,
      );
    for (const version of crd.spec.versions ?? []) {
      const schema = version.schema?.openAPIV3Schema;
      const name = `${pascal(kind)}${pascal(version.name)}`;
      const spec = schema?.properties?.spec;
      const status = schema?.properties?.status;
      const specRequired = schema?.required?.includes("spec") ?? false;
      out += "\n";
      out += interfaceFor(`${name}Spec`, spec);
      if (status) out += `\n${interfaceFor(`${name}Status`, status)}`;
      out += "\n";
      out += docComment(schema?.description ?? `${kind} ${group}/${version.name}`, "");
      out += `export interface ${name} extends KubeObject {\n`;
      out += `  spec${specRequired ? "" : "?"}: ${name}Spec;\n`;
      if (status) out += `  status?: ${name}Status;\n`;
      out += "}\n";
      out += `\nexport const ${name} = kindRef<${name}>(${JSON.stringify(`${group}/${version.name}`)}, ${JSON.stringify(kind)});\n`;
    }
  }
  return out;
}
