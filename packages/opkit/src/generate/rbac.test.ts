import { test } from "node:test";
import assert from "node:assert/strict";
import { kindRef, type KubeObject } from "../client/types.ts";
import { builtinResolver, rbacFor, RbacGenerationError, resolverFromClient } from "./rbac.ts";

const Widgets = kindRef("example.com/v1", "Widget");
const Gadgets = kindRef("example.com/v1alpha1", "Gadget");
const Deployments = kindRef("apps/v1", "Deployment");
const Secrets = kindRef("v1", "Secret");
const ConfigMaps = kindRef("v1", "ConfigMap");
const Nodes = kindRef("v1", "Node");

const resolve = builtinResolver([
  { group: "example.com", kind: "Widget", plural: "widgets", scope: "Namespaced" },
  // A CRD object, as generate/crd produces, for a cluster-scoped kind.
  {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "gadgets.example.com" },
    spec: { group: "example.com", scope: "Cluster", names: { kind: "Gadget", plural: "gadgets" } },
  } as KubeObject,
]);

const controllers = [
  { forKind: Widgets, ownedKinds: [Deployments, Secrets], watchedKinds: [ConfigMaps] },
  { forKind: Gadgets, ownedKinds: [], watchedKinds: [Nodes, Widgets] },
];

type Rules = { rules: unknown[] };
const byKind = (objs: KubeObject[], kind: string) => objs.filter((o) => o.kind === kind);

test("cluster-wide: exact least-privilege rules, merged and sorted", async () => {
  const objs = await rbacFor({
    name: "widget-op",
    namespace: "widget-system",
    controllers,
    resolve,
    ownKinds: [Widgets, Gadgets],
  });
  assert.deepEqual(
    objs.map((o) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`),
    [
      "ClusterRole//widget-op",
      "ClusterRoleBinding//widget-op",
      "Role/widget-system/widget-op-leader-election",
      "RoleBinding/widget-system/widget-op-leader-election",
    ],
  );
  const cr = byKind(objs, "ClusterRole")[0] as unknown as Rules;
  assert.deepEqual(cr.rules, [
    { apiGroups: [""], resources: ["configmaps", "nodes"], verbs: ["get", "list", "watch"] },
    { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
    {
      apiGroups: [""],
      resources: ["secrets"],
      verbs: ["get", "list", "watch", "create", "patch", "delete"],
    },
    {
      apiGroups: ["apps"],
      resources: ["deployments"],
      verbs: ["get", "list", "watch", "create", "patch", "delete"],
    },
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    {
      apiGroups: ["example.com"],
      resources: ["gadgets", "widgets"],
      verbs: ["get", "list", "watch", "patch"],
    },
    {
      apiGroups: ["example.com"],
      resources: ["gadgets/status", "widgets/status"],
      verbs: ["get", "patch"],
    },
    { apiGroups: ["example.com"], resources: ["widgets/finalizers"], verbs: ["update"] },
  ]);
  const crb = byKind(objs, "ClusterRoleBinding")[0] as unknown as { subjects: unknown; roleRef: unknown };
  assert.deepEqual(crb.subjects, [{ kind: "ServiceAccount", name: "widget-op", namespace: "widget-system" }]);
  assert.deepEqual(crb.roleRef, {
    apiGroup: "rbac.authorization.k8s.io",
    kind: "ClusterRole",
    name: "widget-op",
  });
  const le = byKind(objs, "Role")[0] as unknown as Rules;
  assert.deepEqual(le.rules, [
    {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      verbs: ["get", "list", "create", "update", "delete"],
    },
  ]);
});

test("ownKinds: a reconciled kind that is not the operator's own is only read", async () => {
  const Pods = kindRef("v1", "Pod");
  const objs = await rbacFor({
    name: "op",
    namespace: "op-system",
    controllers: [
      // Another project's or a built-in kind, reconciled without children: read only.
      { forKind: Pods, ownedKinds: [], watchedKinds: [] },
      // A built-in kind with children: its finalizers, so the children can block its deletion.
      { forKind: Nodes, ownedKinds: [ConfigMaps], watchedKinds: [] },
      // The operator's own kind, under another version than the one listed: its finalizers and status
      // (no children: no finalizers subresource).
      { forKind: kindRef("example.com/v2", "Widget"), ownedKinds: [], watchedKinds: [] },
    ],
    resolve: async (k) =>
      k.kind === "Widget" ? { group: "example.com", resource: "widgets", namespaced: true } : resolve(k),
    ownKinds: [Widgets],
  });
  const cr = byKind(objs, "ClusterRole")[0] as unknown as Rules;
  assert.deepEqual(cr.rules, [
    {
      apiGroups: [""],
      resources: ["configmaps"],
      verbs: ["get", "list", "watch", "create", "patch", "delete"],
    },
    { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
    { apiGroups: [""], resources: ["nodes", "pods"], verbs: ["get", "list", "watch"] },
    { apiGroups: [""], resources: ["nodes/finalizers"], verbs: ["update"] },
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    {
      apiGroups: ["example.com"],
      resources: ["widgets"],
      verbs: ["get", "list", "watch", "patch"],
    },
    { apiGroups: ["example.com"], resources: ["widgets/status"], verbs: ["get", "patch"] },
  ]);
});

test("watchNamespace: namespaced kinds in a Role there; cluster-scoped kinds keep a ClusterRole", async () => {
  const objs = await rbacFor({
    name: "widget-op",
    namespace: "widget-system",
    watchNamespace: "apps",
    controllers,
    resolve,
    ownKinds: [Widgets, Gadgets],
    leaderElection: false,
  });
  assert.deepEqual(
    objs.map((o) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`),
    [
      "ClusterRole//widget-op",
      "ClusterRoleBinding//widget-op",
      "Role/apps/widget-op",
      "RoleBinding/apps/widget-op",
    ],
  );
  const cr = byKind(objs, "ClusterRole")[0] as unknown as Rules;
  assert.deepEqual(cr.rules, [
    { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] },
    {
      apiGroups: ["example.com"],
      resources: ["gadgets"],
      verbs: ["get", "list", "watch", "patch"],
    },
    { apiGroups: ["example.com"], resources: ["gadgets/status"], verbs: ["get", "patch"] },
  ]);
  const role = byKind(objs, "Role")[0] as unknown as Rules;
  assert.deepEqual(role.rules, [
    { apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch"] },
    { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
    {
      apiGroups: [""],
      resources: ["secrets"],
      verbs: ["get", "list", "watch", "create", "patch", "delete"],
    },
    {
      apiGroups: ["apps"],
      resources: ["deployments"],
      verbs: ["get", "list", "watch", "create", "patch", "delete"],
    },
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    {
      apiGroups: ["example.com"],
      resources: ["widgets"],
      verbs: ["get", "list", "watch", "patch"],
    },
    { apiGroups: ["example.com"], resources: ["widgets/finalizers"], verbs: ["update"] },
    { apiGroups: ["example.com"], resources: ["widgets/status"], verbs: ["get", "patch"] },
  ]);
});

test("all-namespaced kinds with watchNamespace: no ClusterRole at all", async () => {
  const objs = await rbacFor({
    name: "copy",
    namespace: "ops",
    watchNamespace: "ops",
    controllers: [{ forKind: ConfigMaps, ownedKinds: [Secrets], watchedKinds: [] }],
    resolve,
  });
  assert.deepEqual(
    objs.map((o) => o.kind),
    ["Role", "RoleBinding", "Role", "RoleBinding"],
  );
});

test("extra rules merge with derived ones; narrowed rules stay separate; order is deterministic", async () => {
  const input = {
    name: "op",
    namespace: "ns",
    controllers: [{ forKind: ConfigMaps, ownedKinds: [], watchedKinds: [] }],
    extraRules: [
      { apiGroups: [""], resources: ["configmaps"], verbs: ["delete", "get"] },
      { apiGroups: [""], resources: ["secrets"], verbs: ["get"], resourceNames: ["b", "a"] },
      { nonResourceURLs: ["/metrics"], verbs: ["get"] },
    ],
    resolve,
  };
  const a = await rbacFor(input);
  const b = await rbacFor({ ...input, extraRules: [...input.extraRules].reverse() });
  assert.deepEqual(a, b);
  assert.deepEqual((a[0] as unknown as Rules).rules, [
    { apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch", "delete"] },
    { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    { apiGroups: [""], resources: ["secrets"], verbs: ["get"], resourceNames: ["a", "b"] },
    { nonResourceURLs: ["/metrics"], verbs: ["get"] },
  ]);
});

test("without ownKinds no reconciled kind is written; declared permissions add exactly their verbs", async () => {
  const Jobs = kindRef("batch/v1", "Job");
  const Pods = kindRef("v1", "Pod");
  const objs = await rbacFor({
    name: "op",
    namespace: "op-system",
    watchNamespace: "apps",
    leaderElection: false,
    controllers: [
      { forKind: Widgets, ownedKinds: [], watchedKinds: [] },
      {
        forKind: Jobs,
        ownedKinds: [],
        watchedKinds: [Gadgets],
        rbac: [
          { kind: Jobs, verbs: ["delete"] },
          { kind: Pods, verbs: ["create"], subresource: "binding" },
          { kind: Gadgets, verbs: ["update"] },
          { apiGroups: [""], resources: ["nodes"], verbs: ["get"] },
        ],
      },
    ],
    resolve,
  });
  const cr = byKind(objs, "ClusterRole")[0] as unknown as Rules;
  // Cluster-scoped: the declared update on gadgets and the raw rule (no scope hint).
  assert.deepEqual(cr.rules, [
    { apiGroups: [""], resources: ["nodes"], verbs: ["get"] },
    { apiGroups: ["example.com"], resources: ["gadgets"], verbs: ["get", "list", "watch", "update"] },
  ]);
  const role = byKind(objs, "Role")[0] as unknown as Rules;
  assert.deepEqual(role.rules, [
    { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
    { apiGroups: [""], resources: ["pods/binding"], verbs: ["create"] },
    { apiGroups: ["batch"], resources: ["jobs"], verbs: ["get", "list", "watch", "delete"] },
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    { apiGroups: ["example.com"], resources: ["widgets"], verbs: ["get", "list", "watch"] },
  ]);
});

test("resolvers: unknown kinds fail naming the kind and the fix; client mapping is used as is", async () => {
  await assert.rejects(
    rbacFor({
      name: "op",
      namespace: "ns",
      controllers: [{ forKind: kindRef("x.io/v1", "Thing"), ownedKinds: [], watchedKinds: [] }],
      resolve: builtinResolver(),
    }),
    (err: unknown) =>
      err instanceof RbacGenerationError &&
      /x\.io\/v1 Thing/.test(err.message) &&
      /builtinResolver/.test(err.message),
  );
  // Definitions without a kind match by the regular plural.
  assert.deepEqual(
    builtinResolver([{ group: "x.io", plural: "policies", scope: "Cluster" }])(kindRef("x.io/v1", "Policy")),
    {
      group: "x.io",
      resource: "policies",
      namespaced: false,
    },
  );
  const fake = {
    mapping: async () => ({
      apiVersion: "x.io/v1",
      group: "x.io",
      version: "v1",
      kind: "Thing",
      resource: "thingies",
      namespaced: true,
      verbs: [],
      subresources: [],
    }),
  };
  assert.deepEqual(await resolverFromClient(fake)(kindRef("x.io/v1", "Thing")), {
    group: "x.io",
    resource: "thingies",
    namespaced: true,
  });
});
