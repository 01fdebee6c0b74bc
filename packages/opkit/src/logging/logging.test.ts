import { afterEach, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidLogLevelError,
  REDACTED,
  createLogger,
  reconcileLogger,
  type LoggerOptions,
} from "./index.ts";

/** A logger whose lines are collected as parsed JSON. */
function capture(options: Omit<LoggerOptions, "destination"> = {}): {
  logger: ReturnType<typeof createLogger>;
  lines: Record<string, unknown>[];
} {
  const lines: Record<string, unknown>[] = [];
  const destination = {
    write: (s: string): void => void lines.push(JSON.parse(s) as Record<string, unknown>),
  };
  return { logger: createLogger({ ...options, destination }), lines };
}

const saved = { OPKIT_LOG_LEVEL: process.env.OPKIT_LOG_LEVEL, LOG_LEVEL: process.env.LOG_LEVEL };
beforeEach(() => {
  delete process.env.OPKIT_LOG_LEVEL;
  delete process.env.LOG_LEVEL;
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

test("credentials are redacted at the top level, one level down and in request headers", () => {
  const { logger, lines } = capture({ name: "op" });
  logger.info(
    {
      token: "t0p",
      password: "hunter2",
      auth: { token: "abc", user: "me" },
      req: { headers: { authorization: "Bearer xyz", accept: "json" } },
    },
    "connecting",
  );
  const line = lines[0];
  assert.ok(line);
  assert.equal(line.level, "info");
  assert.equal(line.logger, "op", "the logger name is under `logger`: `name` is the reconciled object's");
  assert.equal(line.msg, "connecting");
  assert.equal(typeof line.time, "string");
  assert.equal(line.token, REDACTED);
  assert.equal(line.password, REDACTED);
  assert.deepEqual(line.auth, { token: REDACTED, user: "me" });
  assert.deepEqual(line.req, { headers: { authorization: REDACTED, accept: "json" } });
  assert.doesNotMatch(JSON.stringify(lines), /t0p|hunter2|abc|xyz/);
});

test("the data of Secret objects is redacted, ConfigMap data is not; the caller's object is untouched", () => {
  const { logger, lines } = capture();
  const secret = { apiVersion: "v1", kind: "Secret", metadata: { name: "s" }, data: { key: "c2VjcmV0" } };
  const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: { mode: "fast" } };
  logger.info({ object: secret, related: [configMap], nested: { list: { items: [secret] } } }, "seen");
  const line = lines[0] as {
    object: { data: unknown; metadata: unknown };
    related: { data: unknown }[];
    nested: { list: { items: { data: unknown }[] } };
  };
  assert.deepEqual(line.object.data, { key: REDACTED });
  assert.deepEqual(line.object.metadata, { name: "s" });
  assert.deepEqual(line.related[0]?.data, { mode: "fast" });
  assert.deepEqual(line.nested.list.items[0]?.data, { key: REDACTED });
  assert.equal(secret.data.key, "c2VjcmV0");
});

test("reconcile child loggers carry controller-runtime's field names; redaction applies to them too", () => {
  const { logger, lines } = capture();
  const log = reconcileLogger(logger, {
    controller: "widget",
    namespace: "ns",
    name: "w1",
    reconcileID: "r-1",
  });
  log.info("reconciling");
  reconcileLogger(logger, { controller: "widget", name: "cluster-thing" }).child({ token: "x" }).warn("hi");
  assert.deepEqual(
    { ...lines[0], time: undefined },
    {
      level: "info",
      time: undefined,
      controller: "widget",
      reconcileID: "r-1",
      namespace: "ns",
      name: "w1",
      msg: "reconciling",
    },
  );
  assert.equal(lines[1]?.namespace, undefined);
  assert.match(String(lines[1]?.reconcileID), /^[0-9a-f-]{36}$/);
  assert.equal(lines[1]?.token, REDACTED);
});

test("a reconcile logger makes its pino child only when used, and then behaves as the child", () => {
  const { logger, lines } = capture();
  let children = 0;
  const child = logger.child.bind(logger);
  logger.child = ((...a: Parameters<typeof child>) => (children++, child(...a))) as typeof logger.child;
  reconcileLogger(logger, { controller: "widget", name: "quiet" });
  assert.equal(children, 0, "no child for a reconcile that logs nothing");
  const log = reconcileLogger(logger, { controller: "widget", name: "w", reconcileID: "r-2" });
  assert.equal(log.isLevelEnabled("debug"), false);
  log.level = "debug";
  log.debug({ n: 1 }, "detail");
  assert.equal(children, 1);
  assert.equal(log.level, "debug");
  assert.equal(logger.level, "info", "the parent keeps its level");
  assert.deepEqual(
    [lines[0]?.msg, lines[0]?.name, lines[0]?.reconcileID, lines[0]?.n],
    ["detail", "w", "r-2", 1],
  );
  // The counting wrapper is an own property the child would inherit; back to pino's own method.
  delete (logger as { child?: unknown }).child;
  log.child({ step: "x" }).info("nested");
  assert.equal(lines[1]?.step, "x");
  assert.equal(lines[1]?.reconcileID, "r-2");
});

test("level: option, then OPKIT_LOG_LEVEL, then LOG_LEVEL, then info; unknown levels are refused", () => {
  assert.equal(createLogger({ destination: { write() {} } }).level, "info");
  process.env.LOG_LEVEL = "warn";
  assert.equal(createLogger({ destination: { write() {} } }).level, "warn");
  process.env.OPKIT_LOG_LEVEL = "DEBUG";
  assert.equal(createLogger({ destination: { write() {} } }).level, "debug");
  assert.equal(createLogger({ level: "error", destination: { write() {} } }).level, "error");

  const { logger, lines } = capture({ level: "warn" });
  logger.info("dropped");
  logger.warn("kept");
  assert.deepEqual(
    lines.map((l) => l.msg),
    ["kept"],
  );

  process.env.OPKIT_LOG_LEVEL = "verbose";
  assert.throws(
    () => createLogger({ destination: { write() {} } }),
    (err: unknown) => err instanceof InvalidLogLevelError && /\$OPKIT_LOG_LEVEL/.test(err.message),
  );
});
