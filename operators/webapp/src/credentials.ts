/**
 * The database credentials: generated once, at random, when the WebApp's Secret is first created, and
 * read back from that Secret on every later reconcile, so they never change while the Secret exists.
 * Their values are never logged and never put in an Event or a condition.
 */
import { randomBytes } from "node:crypto";
import type { DeepReadonly, Secret } from "opkit";
import { PASSWORD_KEY, USERNAME_KEY, type Credentials } from "./resources.ts";

/** Fresh credentials: a user `app_<8 hex>` and a 256-bit password (base64url, 43 characters). */
export function generateCredentials(random: (n: number) => Buffer = randomBytes): Credentials {
  return {
    username: `app_${random(4).toString("hex")}`,
    password: random(32).toString("base64url"),
  };
}

function decoded(secret: DeepReadonly<Secret>, key: string): string | undefined {
  const value = secret.data?.[key];
  const text = value === undefined ? "" : Buffer.from(value, "base64").toString("utf8");
  return text.length > 0 ? text : undefined;
}

/**
 * The credentials a live Secret holds. A key someone emptied or removed is generated again; the rest
 * are kept as they are (a password rotated by hand stays).
 */
export function credentialsFrom(
  secret: DeepReadonly<Secret>,
  generate: () => Credentials = generateCredentials,
): Credentials {
  const username = decoded(secret, USERNAME_KEY);
  const password = decoded(secret, PASSWORD_KEY);
  if (username && password) return { username, password };
  const fresh = generate();
  return { username: username ?? fresh.username, password: password ?? fresh.password };
}
