/** `make demo`: seed 003's sample Memcached runs 3 pods and lists them in status.nodes. */
import { Deployments } from "opkit";
import { readSample, type DemoEntry } from "../demo/entry.ts";
import { Memcached } from "./src/api/v1alpha1/memcached.ts";

export const demo: DemoEntry = {
  name: "memcached",
  async apply(ctx) {
    await ctx.client.apply(await readSample(ctx, "cache_v1alpha1_memcached.yaml"), { force: true });
  },
  async rows({ client, namespace }) {
    const name = "memcached-sample";
    const m = await client.getOptional(Memcached, name, { namespace });
    const dep = await client.getOptional(Deployments, name, { namespace });
    const pods = m?.status?.nodes?.length ?? 0;
    const size = m?.spec.size ?? 0;
    return [
      {
        object: `Memcached ${namespace}/${name}`,
        state: m ? `${pods}/${size} pods in status.nodes` : "not created",
        children: dep ? `Deployment ${dep.status?.readyReplicas ?? 0}/${dep.spec?.replicas ?? 0}` : "-",
        converged: Boolean(m && size > 0 && pods === size),
        ref: { kind: Memcached, name, namespace },
      },
    ];
  },
};
