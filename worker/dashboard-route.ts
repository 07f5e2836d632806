/**
 * GET /check/dashboard: the analytics as one self-contained page (dashboard-page.ts), behind
 * LIMITER_ADMIN_TOKEN (a browser logs in with HTTP Basic, the token as password).
 */
import type { Context } from "hono";
import { authorizedReader } from "./dashboard-auth";
import { DASHBOARD_HTML } from "./dashboard-page";
import type { Env } from "./env";

// Nothing but this page's own inline script and style, and fetches to this origin: a proof, in
// the browser, that the page loads nothing from elsewhere.
const CSP =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export async function dashboardHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const authorized = await authorizedReader(c);
  if (!authorized.ok) return authorized.response;
  return c.html(DASHBOARD_HTML, 200, {
    "Cache-Control": "no-store",
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
  });
}
