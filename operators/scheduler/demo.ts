/**
 * `make demo`: seed 004's example 11-18 pod, handed to opkit-scheduler with the sample profiles, waits
 * Unschedulable until a node carries both `device: gpu` (its nodeSelector) and `selectable` (example
 * 11-17's label-presence predicate); the demo then labels one node and the pod is bound to it.
 */
import { Nodes, Pods, type Pod } from "opkit";
import { readSample, type DemoEntry } from "../demo/entry.ts";

const NODE = "opkit-node-0";

export const demo: DemoEntry = {
  name: "scheduler",
  args: ({ dir }) => ["--config", `${dir}/config/samples/scheduler-config.yaml`],
  async apply(ctx) {
    await ctx.client.apply(await readSample<Pod>(ctx, "terminator-pod.yaml"), { force: true });
    await ctx.client.patch(
      Nodes,
      NODE,
      { metadata: { labels: { device: "gpu", selectable: "" } } },
      { type: "merge" },
    );
  },
  async rows({ client, namespace }) {
    const name = "terminator";
    const pod = await client.getOptional(Pods, name, { namespace });
    const node = pod?.spec?.nodeName;
    const why = pod?.status?.conditions?.find((c) => c.type === "PodScheduled" && c.status === "False");
    return [
      {
        object: `Pod ${namespace}/${name}`,
        state: !pod ? "not created" : node ? `bound to ${node}` : (why?.reason ?? "pending"),
        children: "-",
        converged: node === NODE,
        ref: { kind: Pods, name, namespace },
      },
    ];
  },
};
