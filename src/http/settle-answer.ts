/**
 * The answer to POST /check/settle (docs/usage.md): 200 with what was charged per usage rule,
 * 409 when the request was settled already, 404 when there is nothing to settle (never admitted,
 * refunded, or out of every window), 503 when the store could not be asked. Only a 200 changed
 * anything.
 */
import type { Limiter } from "../limiter/limiter-api";
import { problemResponse } from "./problem";
import type { SettleRequest } from "./settle-request";

export async function answerSettle(limiter: Limiter, settle: SettleRequest): Promise<Response> {
  const outcome = await limiter.settle(settle.receipt, settle.usage);
  switch (outcome.status) {
    case "settled":
      return new Response(
        JSON.stringify({
          settled: true,
          usage: settle.usage,
          charged: outcome.policies.map((rule, i) => ({ rule, units: outcome.charged[i] ?? 0 })),
        }),
        { headers: { "Content-Type": "application/json" } },
      );
    case "already-settled":
      return problemResponse(409, {
        title: "Conflict",
        detail: "this receipt was settled already: its usage is charged once",
      });
    case "unknown":
      return problemResponse(404, {
        title: "Not Found",
        detail:
          "nothing to settle for this receipt (refunded, or its request left every window of its rules)",
      });
    default:
      return problemResponse(503, {
        title: "Service Unavailable",
        detail: "the store could not settle the receipt; nothing is known to be charged (retry)",
      });
  }
}
