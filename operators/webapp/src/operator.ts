/**
 * The WebApp operator's single description of itself: `opkit generate` derives its CRD, RBAC and
 * manifests from it, and src/main.ts runs it.
 */
import { defineOperator } from "opkit";
import { WebApp } from "./api/v1alpha1/webapp.ts";
import { webAppController } from "./controllers/webapp.ts";

export default defineOperator({
  name: "webapp",
  domain: "acme.com",
  kinds: [WebApp],
  controllers: [() => webAppController()],
  // A tier change to dev hands the database's claims to the WebApp (see README); nothing else on claims.
  extraRules: [{ apiGroups: [""], resources: ["persistentvolumeclaims"], verbs: ["patch"] }],
});
