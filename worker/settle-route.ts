/**
 * POST /check/settle `{"receipt", "usage"}`: what a usage request admitted by /check really used,
 * charged once (docs/usage.md). The decision token, as /check: whoever may take a reservation
 * may settle it. 200 settled; 409 settled already; 404 nothing to settle; 400 a bad field,
 * named, nothing counted.
 */

import { problemResponse } from "edge-limiter/server";
import type { Context } from "hono";
import { authorizedJson } from "./authorized-check";
import type { Env } from "./env";

export async function settleHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const read = await authorizedJson(c.req.raw, c.env, "decision");
  if (!read.ok) return read.response;
  const { runtime, json } = read;
  const settle = await runtime.rules.parseSettle(json);
  if (!settle.ok) {
    return problemResponse(400, {
      title: "Bad Request",
      detail: `${settle.field} ${settle.detail}`,
      field: settle.field,
    });
  }
  return runtime.rules.answerSettle(runtime.limiter, settle.value);
}
