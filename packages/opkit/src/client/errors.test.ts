import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeApiError } from "./errors.ts";
import {
  AlreadyExistsError,
  ConflictError,
  ForbiddenError,
  GoneError,
  InvalidError,
  NotFoundError,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
  errorFromResponse,
} from "./errors.ts";

const req = { method: "GET", path: "/api/v1/namespaces/x/pods/y" };
const status = (code: number, reason: string, extra: object = {}): object => ({
  kind: "Status",
  code,
  reason,
  message: `m${code}`,
  ...extra,
});

describe("errorFromResponse", () => {
  const cases: [number, string, new (...a: never[]) => KubeApiError][] = [
    [404, "NotFound", NotFoundError],
    [409, "AlreadyExists", AlreadyExistsError],
    [409, "Conflict", ConflictError],
    [422, "Invalid", InvalidError],
    [403, "Forbidden", ForbiddenError],
    [410, "Expired", GoneError],
    [429, "TooManyRequests", TooManyRequestsError],
    [504, "Timeout", TimeoutError],
    [500, "InternalError", ServerError],
    [503, "ServiceUnavailable", ServerError],
  ];
  for (const [code, reason, cls] of cases) {
    it(`maps ${code} ${reason} to ${cls.name}, keeping the Status and the request`, () => {
      const err = errorFromResponse(code, status(code, reason), req);
      assert.ok(err instanceof cls);
      assert.equal(err.code, code);
      assert.equal(err.status.message, `m${code}`);
      assert.deepEqual(err.request, req);
      assert.match(err.message, new RegExp(`GET /api/v1/namespaces/x/pods/y: ${code}`));
    });
  }

  it("exposes the field causes of an Invalid error", () => {
    const err = errorFromResponse(
      422,
      status(422, "Invalid", { details: { causes: [{ field: "spec.size", message: "must be ≥ 1" }] } }),
      req,
    );
    assert.ok(err instanceof InvalidError);
    assert.deepEqual(err.causes, [{ field: "spec.size", message: "must be ≥ 1" }]);
  });

  it("keeps a non-JSON body as the message", () => {
    const err = errorFromResponse(502, "<html>bad gateway</html>", req);
    assert.ok(err instanceof ServerError);
    assert.equal(err.status.message, "<html>bad gateway</html>");
  });
});
