/**
 * What the seed operators' integration tests share: the test env and the operator's project made before
 * the tests and cleaned up after them (also when a test or the set-up failed), and the samples read as
 * `make demo` reads them (`readSample`).
 */
import { after, before } from "node:test";
import { operatorProject, useTestEnv, type OperatorProject, type TestEnv } from "opkit/testenv";

export { readSample } from "./entry.ts";

/** The shared control plane and the operator's project (CRDs, RBAC, its namespace). */
export interface OperatorTestContext {
  readonly env: TestEnv;
  readonly project: OperatorProject;
  /** The project's namespace. */
  readonly ns: string;
}

/** What a test file adds to the shared set-up and clean-up. */
export interface OperatorTestHooks {
  /** The project's namespace (default: the operator's). */
  namespace?: string;
  /** After the project exists: start the operator, prepare fixtures. */
  setup?(ctx: OperatorTestContext): Promise<void>;
  /** Before the project's clean-up (which stops the operator processes it started). */
  beforeCleanup?(): Promise<void>;
  /** After the project's clean-up, before the test env's. */
  afterCleanup?(): Promise<void>;
}

/** Register the `before` and `after` of a seed operator's integration test file (operator folder `root`). */
export function operatorTest(root: string, hooks: OperatorTestHooks = {}): void {
  let env: TestEnv | undefined;
  let project: OperatorProject | undefined;
  before(async () => {
    env = await useTestEnv();
    project = await operatorProject(env, root, hooks.namespace ? { namespace: hooks.namespace } : {});
    await hooks.setup?.({ env, project, ns: project.namespace });
  });
  after(async () => {
    await hooks.beforeCleanup?.();
    await project?.cleanup();
    await hooks.afterCleanup?.();
    await env?.cleanup();
  });
}
