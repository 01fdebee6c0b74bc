/** Kinds for the `opkit generate crd` tests: two versions of one kind grouped, one alone, and a non-kind. */
import * as Type from "typebox/type";
import { defineKind, defineKindVersions } from "opkit";

export const WidgetV1alpha1 = defineKind({
  group: "test.opkit.dev",
  version: "v1alpha1",
  kind: "Widget",
  spec: Type.Object({ size: Type.Integer({ minimum: 1 }) }),
});

export const WidgetV1 = defineKind({
  group: "test.opkit.dev",
  version: "v1",
  kind: "Widget",
  storage: true,
  spec: Type.Object({ replicas: Type.Integer({ minimum: 0, default: 1 }) }),
});

export const Widgets = defineKindVersions([WidgetV1alpha1, WidgetV1]);

export const Gadget = defineKind({
  group: "test.opkit.dev",
  version: "v1",
  kind: "Gadget",
  scope: "Cluster",
  spec: Type.Object({ color: Type.String({ enum: ["red", "blue"] }) }),
  status: Type.Object({ ready: Type.Optional(Type.Boolean()) }),
});

export const notAKind = { kind: "Widget", group: "test.opkit.dev" };
