/** `make demo`: seed 001's sample AppService becomes a Deployment of 2 and a NodePort Service. */
import { Deployments, Services } from "opkit";
import { readSample, type DemoEntry } from "../demo/entry.ts";
import { AppService } from "./src/api/v1/appservice.ts";

export const demo: DemoEntry = {
  name: "appservice",
  async apply(ctx) {
    await ctx.client.apply(await readSample(ctx, "example_appservice.yaml"), { force: true });
  },
  async rows({ client, namespace }) {
    const name = "appservice-sample";
    const app = await client.getOptional(AppService, name, { namespace });
    const dep = await client.getOptional(Deployments, name, { namespace });
    const svc = await client.getOptional(Services, name, { namespace });
    const ready = app?.status?.readyReplicas ?? 0;
    const size = app?.spec.size ?? 0;
    return [
      {
        object: `AppService ${namespace}/${name}`,
        state: app ? `${ready}/${size} ready` : "not created",
        children:
          [dep && "Deployment", svc && `Service ${svc.spec?.type ?? ""}`].filter(Boolean).join(", ") || "-",
        converged: Boolean(app && dep && svc && size > 0 && ready === size),
        ref: { kind: AppService, name, namespace },
      },
    ];
  },
};
