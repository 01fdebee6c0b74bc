/**
 * Poll until a condition holds: the one wait loop tests use against the control plane, with a message
 * that says what was awaited and the last error seen.
 */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last instanceof Error ? last.message : JSON.stringify(last)}` : ""}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
