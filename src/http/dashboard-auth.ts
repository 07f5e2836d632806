/**
 * Who may read the analytics (GET /check/stats, /check/dashboard): a holder of LIMITER_TOKEN,
 * as `Authorization: Bearer <token>` or, for a browser, HTTP Basic with the token as the
 * password (any user name). Compared in constant time by bearer-token.ts. A refusal challenges
 * with Basic, so a browser asks for the password.
 */
import type { Context } from "hono";
import type { Env } from "../env";
import { getRuntime, type ReadyRuntime } from "../runtime";
import { bearerTokenMatches } from "./bearer-token";
import { misconfiguredForOperator, problemResponse } from "./problem";

export async function authorizedReader(
  c: Context<{ Bindings: Env }>,
): Promise<{ ok: true; runtime: ReadyRuntime } | { ok: false; response: Response }> {
  const expected = c.env.LIMITER_TOKEN;
  if (!expected) {
    return { ok: false, response: unauthorized("LIMITER_TOKEN is not configured: closed") };
  }
  if (!(await bearerTokenMatches(asBearer(c.req.header("Authorization")), expected))) {
    return {
      ok: false,
      response: unauthorized("send the LIMITER_TOKEN as a bearer token or as the password"),
    };
  }
  const runtime = getRuntime(c.env);
  if (!runtime.ok) return { ok: false, response: misconfiguredForOperator(c, runtime) };
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
