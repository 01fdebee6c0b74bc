/**
 * The checks the CRD's schema cannot make (seed 002's semantic validation, done in the controller):
 * the host name must be one an Ingress accepts, the image must be a container image reference, and the
 * WebApp's name must leave room for its children's names. A failed check is the user's to fix: the
 * controller reports it (condition and Warning Event) and waits for the next spec change.
 */
import type { DeepReadonly } from "opkit";
import type { WebAppObject } from "./api/v1alpha1/webapp.ts";

/** A spec the operator cannot act on; `problems` lists each field and what is wrong with it. */
export class InvalidSpecError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid WebApp: ${problems.join("; ")}`);
    this.name = "InvalidSpecError";
    this.problems = problems;
  }
}

/**
 * The longest WebApp name: `<name>-db` names the StatefulSet and its headless Service, and a
 * StatefulSet's pods carry a `controller-revision-hash` label of `<name>-db-<10 characters>`, which
 * must fit a 63-character label value.
 */
export const MAX_NAME_LENGTH = 49;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
// The distribution reference grammar (docker/distribution reference.go), without the length checks.
const IMAGE =
  /^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?\/)?[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$/;

/** A host an Ingress rule accepts: a lower-case DNS subdomain, optionally `*.` + one. */
export function hostnameProblem(host: string): string | undefined {
  const bare = host.startsWith("*.") ? host.slice(2) : host;
  if (bare.length === 0 || bare.length > 253) return "must be 1 to 253 characters";
  if (/^[0-9.]+$/.test(bare)) return "must be a host name, not an IP address";
  for (const label of bare.split(".")) {
    if (label.length > 63 || !DNS_LABEL.test(label)) {
      return "must be a DNS name: lower-case letters, digits, '-' and '.', each part at most 63 characters, starting and ending with a letter or digit (e.g. app.acme.com)";
    }
  }
  return undefined;
}

export function imageProblem(image: string): string | undefined {
  return image.length <= 512 && IMAGE.test(image)
    ? undefined
    : "must be a container image reference such as registry.acme.com/app/app:v1.4";
}

/** Every problem of the WebApp's spec and name; empty when the operator can act on it. */
export function specProblems(app: DeepReadonly<WebAppObject>): string[] {
  const problems: string[] = [];
  const name = app.metadata.name ?? "";
  if (name.length > MAX_NAME_LENGTH || !DNS_1035_LABEL.test(name)) {
    problems.push(
      `metadata.name "${name}" must start with a letter, have only lower-case letters, digits and '-', and be at most ${MAX_NAME_LENGTH} characters (it names the Services and the StatefulSet)`,
    );
  }
  const host = hostnameProblem(app.spec.webAppHostname);
  if (host) problems.push(`spec.webAppHostname "${app.spec.webAppHostname}" ${host}`);
  const image = imageProblem(app.spec.webAppImage);
  if (image) problems.push(`spec.webAppImage "${app.spec.webAppImage}" ${image}`);
  return problems;
}
