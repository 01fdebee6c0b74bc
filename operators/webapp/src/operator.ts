/**
 * The WebApp operator's single description of itself: `opkit generate` derives its CRD, RBAC and
 * manifests from it, and src/main.ts runs it.
 */
import { ConfigMaps, MANAGER_LABEL, Secrets, cacheKind, defineOperator, managerLabelValue } from "opkit";
import { WebApp } from "./api/v1alpha1/webapp.ts";
import { webAppController } from "./controllers/webapp.ts";

const NAME = "webapp";
// Its children carry opkit's manager label: the operator caches its own Secrets and ConfigMaps, not
// every one of the cluster. (A Secret of a child's name that is not its own is read from the API server.)
const own = `${MANAGER_LABEL}=${managerLabelValue(NAME)}`;

export default defineOperator({
  name: NAME,
  domain: "acme.com",
  kinds: [WebApp],
  controllers: [() => webAppController()],
  cacheKinds: [cacheKind(Secrets, { labelSelector: own }), cacheKind(ConfigMaps, { labelSelector: own })],
  // A tier change to dev hands the database's claims to the WebApp (see README); nothing else on claims.
  extraRules: [{ apiGroups: [""], resources: ["persistentvolumeclaims"], verbs: ["patch"] }],
});
