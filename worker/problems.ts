/**
 * The worker's 503 for a configuration that does not validate. Which requests are limited is
 * unknown, so every one is refused rather than let through unprotected. The public answer (the
 * proxy) names the setting, never why, since the reason may quote a secret (the Upstash client's
 * error quotes the store URL); a caller past a token (/check and its routes, the dashboard) also
 * gets why. The operator's log has the reason once per isolate (runtime.ts).
 */
import { problemResponse } from "edge-limiter/server";

export function misconfigured(
  issue: { field: string; detail: string },
  audience: "public" | "operator",
): Response {
  const why = audience === "operator" ? issue.detail : "is invalid: the operator's log says why";
  return problemResponse(503, {
    title: "Limiter misconfigured",
    detail: `${issue.field} ${why}`,
    field: issue.field,
  });
}
