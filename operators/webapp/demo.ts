/**
 * `make demo`: seed 004's sample WebApp (example 11-2) becomes a Deployment, a PostgreSQL StatefulSet
 * with its headless Service, a ConfigMap, a Secret, a Service and an Ingress.
 */
import { ConfigMaps, Deployments, Ingresses, Secrets, Services, StatefulSets } from "opkit";
import { readSample, type DemoEntry } from "../demo/entry.ts";
import { WebApp } from "./src/api/v1alpha1/webapp.ts";

export const demo: DemoEntry = {
  name: "webapp",
  async apply(ctx) {
    await ctx.client.apply(await readSample(ctx, "workloads_v1alpha1_webapp.yaml"), { force: true });
  },
  async rows({ client, namespace }) {
    const name = "webapp-sample";
    const opts = { namespace };
    const app = await client.getOptional(WebApp, name, opts);
    const dep = await client.getOptional(Deployments, name, opts);
    const sts = await client.getOptional(StatefulSets, `${name}-db`, opts);
    const children = [
      dep && `Deployment ${dep.status?.availableReplicas ?? 0}/${dep.spec?.replicas ?? 0}`,
      sts && `StatefulSet ${sts.status?.readyReplicas ?? 0}/${sts.spec?.replicas ?? 0}`,
      (await client.getOptional(ConfigMaps, `${name}-config`, opts)) && "ConfigMap",
      (await client.getOptional(Secrets, `${name}-db-credentials`, opts)) && "Secret",
      (await client.getOptional(Services, name, opts)) && "Service",
      (await client.getOptional(Ingresses, name, opts)) && "Ingress",
    ].filter(Boolean);
    const ready = app?.status?.conditions?.find((c) => c.type === "Ready");
    return [
      {
        object: `WebApp ${namespace}/${name}`,
        state: app
          ? `${app.spec.deploymentTier}, ${ready?.status === "True" ? "Ready" : (ready?.reason ?? "pending")}`
          : "not created",
        children: children.join(", ") || "-",
        converged: Boolean(app?.status?.created && ready?.status === "True"),
        ref: { kind: WebApp, name, namespace },
      },
    ];
  },
};
