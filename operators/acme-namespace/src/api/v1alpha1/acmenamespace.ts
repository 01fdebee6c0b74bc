/**
 * AcmeNamespace (tenancy.acme.com/v1alpha1, cluster-scoped): seed 004's tenant namespace, defined once.
 * `namespaceName` (immutable) is the Namespace it creates, `adminUsername` the user who administers it,
 * `deploymentTier` (dev, stg or prod) picks its quota and container defaults.
 *
 * The book writes the version `v1alapha1` (a misspelling). The CRD also serves that name, with the same
 * schema, deprecated, with a warning naming `v1alpha1`: the book's manifests apply unchanged and their
 * user learns how to fix them. Both names are one resource; objects are stored and read as v1alpha1.
 */
import * as Type from "typebox/type";
import { cel, conditions, defineKind, stringEnum, type ObjectOf } from "opkit";

export const GROUP = "tenancy.acme.com";
export const TIERS = ["dev", "stg", "prod"] as const;
export type Tier = (typeof TIERS)[number];
export const DEFAULT_TIER: Tier = "dev";
export const PHASES = ["CreationInProgress", "Created"] as const;
export type Phase = (typeof PHASES)[number];

/** A label value: the Namespace carries `admin: <adminUsername>` (seed 004), so the name must fit one. */
const LABEL_VALUE = "^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

export const AcmeNamespaceSpec = Type.Object({
  namespaceName: cel(
    Type.String({
      minLength: 1,
      maxLength: 63,
      pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
      description: "The name of the namespace (a DNS label). Cannot be changed.",
    }),
    [
      {
        rule: "self == oldSelf",
        message: "namespaceName is immutable: create another AcmeNamespace instead",
      },
    ],
  ),
  adminUsername: Type.String({
    minLength: 1,
    maxLength: 63,
    pattern: LABEL_VALUE,
    description:
      "The username for the namespace admin, as the identity provider names the user (it becomes the namespace's `admin` label, so it must be a label value).",
  }),
  deploymentTier: stringEnum(TIERS, {
    default: DEFAULT_TIER,
    description: "dev, stg or prod: the namespace's resource quota and container defaults. Default dev.",
  }),
});

export const AcmeNamespaceStatus = Type.Object({
  phase: Type.Optional(
    stringEnum(PHASES, {
      description:
        "Tracks the phase of the AcmeNamespace: empty (new), CreationInProgress (children being created; after a crash the operator looks at what exists and completes it), Created.",
    }),
  ),
  observedGeneration: Type.Optional(Type.Integer({ description: "The generation this status describes." })),
  conditions: Type.Optional(conditions()),
});

const common = {
  group: GROUP,
  kind: "AcmeNamespace",
  scope: "Cluster" as const,
  description:
    "AcmeNamespace is a tenant namespace: the Namespace, its quota and limits by tier, network isolation and its admin.",
  spec: AcmeNamespaceSpec,
  status: AcmeNamespaceStatus,
  printerColumns: [
    { name: "Namespace", type: "string" as const, jsonPath: ".spec.namespaceName" },
    { name: "Admin", type: "string" as const, jsonPath: ".spec.adminUsername" },
    { name: "Tier", type: "string" as const, jsonPath: ".spec.deploymentTier" },
    { name: "Phase", type: "string" as const, jsonPath: ".status.phase" },
    { name: "Age", type: "date" as const, jsonPath: ".metadata.creationTimestamp" },
  ],
};

export const AcmeNamespace = defineKind({ ...common, version: "v1alpha1", storage: true });

/** The book's spelling, served for its manifests only. */
export const AcmeNamespaceV1alapha1 = defineKind({
  ...common,
  version: "v1alapha1",
  deprecated: true,
  deprecationWarning: `${GROUP}/v1alapha1 is a misspelling of ${GROUP}/v1alpha1: write apiVersion: ${GROUP}/v1alpha1`,
});

export type AcmeNamespaceObject = ObjectOf<typeof AcmeNamespace>;
