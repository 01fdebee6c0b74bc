/**
 * An operator whose cache can never sync (its list is refused: a field selector the server does not
 * support), run as `runOperator`-made
 * operators run: `await mgr.run()` and then nothing, so the process ends only when nothing is left
 * pending. Used to show that a SIGTERM during the sync lets the process exit at once.
 */
import { Manager, cacheKind, controller, kindRef, type KubeObject } from "../../index.ts";

const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");

const mgr = await Manager.create({
  kubeconfig: process.env.KUBECONFIG,
  name: "stuck-sync",
  metrics: false,
  health: { host: "127.0.0.1", port: 0 },
  cache: {
    namespace: process.env.NAMESPACE ?? "default",
    kinds: [cacheKind(ConfigMaps, { fieldSelector: "spec.unsupported=x" })],
  },
  leaderElection: false,
});
mgr.add(
  controller("never-synced")
    .for(ConfigMaps)
    .reconcile(() => undefined),
);
await mgr.run();
