import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { CrdParseError, typesFromCrd } from "./types-from-crd.ts";

const run = promisify(execFile);

const CERTIFICATE = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  names: { kind: Certificate, plural: certificates }
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          description: "A Certificate resource. It ends */ here."
          type: object
          required: [spec]
          properties:
            apiVersion: { type: string }
            kind: { type: string }
            metadata: { type: object }
            spec:
              type: object
              required: [secretName, issuerRef]
              properties:
                secretName:
                  description: |-
                    Name of the Secret resource.
                    Second line.
                  type: string
                dnsNames: { type: array, items: { type: string } }
                duration: { type: string, nullable: true }
                issuerRef:
                  type: object
                  required: [name]
                  properties:
                    name: { type: string }
                    kind: { type: string }
                privateKey:
                  type: object
                  properties:
                    algorithm: { type: string, enum: [RSA, ECDSA, Ed25519] }
                    size: { type: integer }
                secretTemplate:
                  type: object
                  properties:
                    labels: { type: object, additionalProperties: { type: string } }
                port:
                  x-kubernetes-int-or-string: true
                  anyOf: [{ type: integer }, { type: string }]
                extra: { type: object, x-kubernetes-preserve-unknown-fields: true }
                open:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties: { known: { type: boolean } }
                "with-dash": { type: string }
                usages: { type: array, items: { type: string, enum: [signing, "digital signature"] } }
            status:
              type: object
              properties:
                conditions:
                  type: array
                  items:
                    type: object
                    required: [type, status]
                    properties:
                      type: { type: string }
                      status: { type: string, enum: ["True", "False", Unknown] }
                revision: { type: integer }
    - name: v1alpha2
      served: true
      storage: false
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: { type: object, x-kubernetes-preserve-unknown-fields: true }
`;

describe("typesFromCrd", () => {
  it("writes interfaces, object types and KindRef constants", () => {
    const src = typesFromCrd(CERTIFICATE);
    assert.match(src, /export interface CertificateV1Spec \{/);
    assert.match(src, /export interface CertificateV1Status \{/);
    assert.match(
      src,
      /export interface CertificateV1 extends KubeObject \{\n {2}spec: CertificateV1Spec;\n {2}status\?: CertificateV1Status;/,
    );
    assert.match(
      src,
      /export const CertificateV1 = kindRef<CertificateV1>\("cert-manager\.io\/v1", "Certificate"\);/,
    );
    assert.match(src, /export type CertificateV1alpha2Spec = Record<string, unknown>;/);
    assert.match(src, /spec\?: CertificateV1alpha2Spec;/);
    assert.match(src, / {2}secretName: string;/);
    assert.match(src, / {2}dnsNames\?: string\[\];/);
    assert.match(src, / {2}duration\?: string \| null;/);
    assert.match(src, /algorithm\?: "RSA" \| "ECDSA" \| "Ed25519";/);
    assert.match(src, /labels\?: Record<string, string>;/);
    assert.match(src, /port\?: number \| string;/);
    assert.match(src, /extra\?: Record<string, unknown>;/);
    assert.match(src, /\[field: string\]: unknown;/);
    assert.match(src, /"with-dash"\?: string;/);
    assert.match(src, /usages\?: \("signing" \| "digital signature"\)\[\];/);
    assert.match(src, / {2}\/\*\*\n {3}\* Name of the Secret resource\.\n {3}\* Second line\.\n {3}\*\//);
    assert.ok(!src.includes("ends */"), "a description must not close its comment");
    assert.equal(typesFromCrd(CERTIFICATE), src);
  });

  it("produces code that compiles under strict TypeScript", async () => {
    const dir = await mkdtemp(join(tmpdir(), "opkit-types-"));
    try {
      const typesPath = resolve(fileURLToPath(import.meta.url), "../../client/types.ts");
      const src = typesFromCrd(CERTIFICATE, { importFrom: typesPath });
      const use = `import { CertificateV1 } from "./cert.ts";
const c: CertificateV1 = { metadata: { name: "x" }, spec: { secretName: "s", issuerRef: { name: "i" }, port: 8, open: { known: true, other: 1 } } };
const ref: { apiVersion: string; kind: string } = CertificateV1;
export { c, ref };
`;
      await writeFile(join(dir, "cert.ts"), src);
      await writeFile(join(dir, "use.ts"), use);
      const tsc = resolve(fileURLToPath(import.meta.url), "../../../../../node_modules/typescript/bin/tsc");
      await run(process.execPath, [
        tsc,
        "--noEmit",
        "--strict",
        "--exactOptionalPropertyTypes",
        "--target",
        "es2022",
        "--module",
        "nodenext",
        "--allowImportingTsExtensions",
        "--skipLibCheck",
        join(dir, "use.ts"),
      ]).catch((err: { stdout?: string }) =>
        assert.fail(`tsc failed:\n${err.stdout ?? JSON.stringify(err)}\n${src}`),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("says what is missing when the input is not a CRD", () => {
    assert.throws(() => typesFromCrd("kind: ConfigMap\napiVersion: v1\n"), CrdParseError);
    assert.throws(() => typesFromCrd("a: [\n"), /invalid YAML/);
  });
});
