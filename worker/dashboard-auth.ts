/**
 * Who may read the analytics and the plans (GET /check/stats, /check/dashboard, /check/plans):
 * a holder of LIMITER_ADMIN_TOKEN (token-scope.ts), as `Authorization: Bearer <token>` or, for
 * a browser, HTTP Basic with the token as the password (any user name). Compared in constant
 * time by bearer-token.ts. A refusal challenges with Basic, so a browser asks for the password.
 */

import { problemResponse } from "edge-limiter/server";
import type { Context } from "hono";
import type { Env } from "./env";
import { misconfigured } from "./problems";
import { getRuntime, type ReadyRuntime } from "./runtime";
import { tokenRefusal } from "./token-scope";

export async function authorizedReader(
  c: Context<{ Bindings: Env }>,
): Promise<{ ok: true; runtime: ReadyRuntime } | { ok: false; response: Response }> {
  const header = c.req.header("Authorization");
  const presented = asBearer(header);
  const refusal = tokenRefusal(presented, c.env, "admin");
  if (refusal) {
    // The decision token sent as a browser's password: 401, not 403, so the browser asks for
    // the password again (after a 403 it keeps resending the one it has).
    const basic = presented !== header;
    return {
      ok: false,
      response:
        refusal.status === 403 && !basic
          ? problemResponse(
              403,
              { title: "Forbidden", detail: refusal.detail },
              { "WWW-Authenticate": 'Bearer error="insufficient_scope"' },
            )
          : unauthorized(refusal.detail),
    };
  }
  const runtime = getRuntime(c.env);
  if (!runtime.ok) return { ok: false, response: misconfigured(runtime, "operator") };
  return { ok: true, runtime };
}

/** `Basic base64(user:password)` → `Bearer password`; a Bearer header as it is. */
function asBearer(header: string | undefined): string | undefined {
  const basic = header?.match(/^basic ([A-Za-z0-9+/=]+)$/i)?.[1];
  if (basic === undefined) return header;
  let decoded: string;
  try {
    // Basic credentials are UTF-8 (RFC 7617 charset="UTF-8", which the challenge asks for).
    decoded = new TextDecoder().decode(Uint8Array.from(atob(basic), (ch) => ch.charCodeAt(0)));
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(":");
  return colon < 0 ? undefined : `Bearer ${decoded.slice(colon + 1)}`;
}

function unauthorized(detail: string): Response {
  // Basic alone: a browser then asks for the password (Chromium gives up on the challenge when
  // a Bearer one is listed beside it). Bearer clients send their token without being asked.
  return problemResponse(
    401,
    { title: "Unauthorized", detail },
    { "WWW-Authenticate": 'Basic realm="edge-limiter", charset="UTF-8"' },
  );
}
