/**
 * The AppService operator's single description of itself: `opkit generate` derives its CRD, RBAC and
 * manifests from it, and src/main.ts runs it.
 */
import { defineOperator } from "opkit";
import { AppService } from "./api/v1/appservice.ts";
import { appServiceController } from "./controllers/appservice.ts";

export default defineOperator({
  name: "appservice",
  domain: "kosmos.io",
  kinds: [AppService],
  controllers: [() => appServiceController()],
});
