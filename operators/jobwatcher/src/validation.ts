/**
 * What makes a JobWatcher spec valid, as one pure function: the CRD's schema and CEL rules express the
 * same limits for the API server, the controller refuses to act on a spec that fails here, and the
 * validating webhook calls it too. Patterns are compiled with re2js (RE2: matching time linear in the
 * input, no backtracking), so no user's pattern can stall the operator's single thread.
 */
import { RE2JS } from "re2js";
import type { ValidationIssue } from "opkit";
import { JobWatcher, MAX_PATTERN_LENGTH } from "./api/v1/jobwatcher.ts";

/** One problem, named by its path from the object root, e.g. `spec.jobNamePatterns[2]`. */
export type FieldError = ValidationIssue;

const NAMED_GROUP = /\(\?P?</;

/**
 * Compile one pattern for whole-name matching, or say why it cannot be used. The message is RE2's own
 * ("error parsing regexp: missing closing ): `(`"), the same words the API server's CEL rule reports.
 */
export function compilePattern(source: string): RE2JS | string {
  if (source.length === 0) return "must not be empty (it would match no name)";
  if (source.length > MAX_PATTERN_LENGTH) return `must be at most ${MAX_PATTERN_LENGTH} characters`;
  if (NAMED_GROUP.test(source))
    return "must not use named groups ((?P<name>...) or (?<name>...)): matching needs none, write (...) or (?:...)";
  try {
    // RE2JS.matches is a whole-input match: "batch-.*" matches "batch-1" but "atch" does not.
    return RE2JS.compile(source);
  } catch (err) {
    return `is not a valid RE2 regular expression: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/**
 * Every problem of a JobWatcher or ClusterJobWatcher spec: the schema's (types, ranges, list and string
 * lengths) and each pattern that RE2 refuses. An empty list means the spec is valid.
 */
export function validateJobWatcherSpec(spec: unknown): FieldError[] {
  // The kinds share one spec schema; JobWatcher's validate checks it (status is not looked at here).
  const errors = JobWatcher.validate({ spec });
  if (typeof spec !== "object" || spec === null) return errors;
  const seen = new Set(errors.map((e) => e.path));
  for (const field of ["namespacePatterns", "jobNamePatterns"] as const) {
    const list = (spec as Record<string, unknown>)[field];
    if (!Array.isArray(list)) continue;
    list.forEach((p: unknown, i) => {
      const path = `spec.${field}[${i}]`;
      if (typeof p !== "string" || seen.has(path)) return;
      const compiled = compilePattern(p);
      if (typeof compiled === "string") errors.push({ path, message: compiled });
    });
  }
  return errors;
}
