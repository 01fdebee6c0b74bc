/**
 * `make demo`, second part: the seeds' operators on the demo control plane (env "demo", started by
 * scripts/demo.ts). Installs their generated CRDs, runs each operator from its own entry point, applies
 * the seeds' samples and shows them converge: AppService's Deployment and NodePort Service, Memcached's
 * pods in status.nodes, and a finished Job deleted by a JobWatcher at its TTL. The operators stop at the
 * end; the objects and the env stay to be explored.
 */
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { Deployments, Jobs, NotFoundError, Services, type Job, type KubeObject } from "opkit";
import {
  ControlPlane,
  eventually,
  readManifests,
  startOperatorProcess,
  type OperatorProcess,
} from "opkit/testenv";
import { AppService } from "./appservice/src/api/v1/appservice.ts";
import { JobWatcher } from "./jobwatcher/src/api/v1/jobwatcher.ts";
import { Memcached } from "./memcached/src/api/v1alpha1/memcached.ts";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const ns = "demo";
const cp = new ControlPlane("demo");
if (!(await cp.isRunning())) {
  console.error("env demo is not running: run `make demo` (it starts it first)");
  process.exit(1);
}
const client = await cp.client({ fieldManager: "opkit-demo" });
const t0 = Date.now();
const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`.padStart(6);
const sample = async <T extends KubeObject>(path: string): Promise<T> => {
  const obj = parse(await readFile(here(path), "utf8")) as T;
  obj.metadata.namespace = ns;
  return obj;
};

const operators: OperatorProcess[] = [];
try {
  await client.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  for (const name of ["jobwatcher", "appservice", "memcached"]) {
    for (const f of await readdir(here(`./${name}/config/crds`)))
      for (const crd of await readManifests(here(`./${name}/config/crds/${f}`)))
        await client.apply(crd, { force: true });
    const op = startOperatorProcess(here(`./${name}/src/main.ts`), {
      args: [
        "--kubeconfig",
        cp.kubeconfigPath,
        "--metrics-bind-address=127.0.0.1:0",
        "--health-probe-bind-address=127.0.0.1:0",
        "--log-level=warn",
      ],
    });
    operators.push(op);
  }
  client.mapper.invalidate();
  console.log(`${at()}  CRDs installed; jobwatcher, appservice and memcached operators starting`);

  // Seed 001's example_appservice.yaml, as the seed wrote it.
  await client.apply(await sample(`./appservice/config/samples/example_appservice.yaml`), { force: true });
  // Seed 003's sample: size 3.
  await client.apply(await sample(`./memcached/config/samples/cache_v1alpha1_memcached.yaml`), {
    force: true,
  });
  // A JobWatcher with a short TTL, and a Job that kwok completes.
  await client.apply(
    JobWatcher.new(
      "demo",
      { ttlSecondsAfterSucceeded: 5, ttlSecondsAfterFailed: 60, checkIntervalSeconds: 300 },
      { namespace: ns },
    ),
    { force: true },
  );
  await client
    .delete(Jobs, "pi", { namespace: ns, propagationPolicy: "Background" })
    .catch((err: unknown) => {
      if (!(err instanceof NotFoundError)) throw err;
    });
  await eventually(
    "the previous demo Job gone",
    async () => !(await client.get(Jobs, "pi", { namespace: ns }).catch(() => undefined)),
  );
  const job = parse(await readFile(here("./jobwatcher/config/samples/job.yaml"), "utf8")) as Job;
  job.metadata.namespace = ns;
  await client.create(job);
  console.log(
    `${at()}  applied: AppService appservice-sample, Memcached memcached-sample, JobWatcher demo, Job pi`,
  );

  const app = await eventually("the AppService ready", async () => {
    const a = await client.get(AppService, "appservice-sample", { namespace: ns });
    return a.status?.readyReplicas === 2 ? a : undefined;
  });
  const svc = await client.get(Services, "appservice-sample", { namespace: ns });
  const dep = await client.get(Deployments, "appservice-sample", { namespace: ns });
  console.log(
    `${at()}  AppService: Deployment ${dep.metadata.name} ${app.status?.readyReplicas}/${app.spec.size} ready (${dep.spec?.template.spec?.containers[0]?.image}); Service ${svc.spec?.type} ${svc.spec?.ports?.map((p) => `${p.port}:${p.nodePort}/${p.protocol}`).join(",")}`,
  );
  const m = await eventually("the Memcached nodes", async () => {
    const x = await client.get(Memcached, "memcached-sample", { namespace: ns });
    return x.status?.nodes?.length === 3 ? x : undefined;
  });
  console.log(`${at()}  Memcached: status.nodes = ${m.status?.nodes?.join(", ")}`);
  const done = await eventually("the Job finished", async () => {
    const j = await client.get(Jobs, "pi", { namespace: ns });
    return j.status?.conditions?.find((c) => c.type === "Complete" && c.status === "True");
  });
  console.log(`${at()}  Job pi completed at ${done.lastTransitionTime}; the JobWatcher's TTL is 5 s`);
  await eventually(
    "the Job deleted",
    async () => !(await client.get(Jobs, "pi", { namespace: ns }).catch(() => undefined)),
    60_000,
    100,
  );
  const gone = Date.now();
  console.log(
    `${at()}  Job pi deleted ${((gone - Date.parse(done.lastTransitionTime ?? "")) / 1000).toFixed(1)} s after it completed`,
  );
} finally {
  await Promise.all(operators.map((o) => o.stop()));
  await client.close();
}
console.log(`\nThe objects stay in namespace ${ns}. Run an operator yourself:`);
console.log(`  npx opkit run operators/appservice --kubeconfig ${cp.kubeconfigPath}`);
console.log(`  npx opkit env kubectl --name demo -- get appservices,memcacheds,jobwatchers -n ${ns}`);
process.exit(0);
