/**
 * The answer to POST /check/release (docs/check-api.md): 200 when the slot was held and is given
 * back, 404 when it was not (unknown, another key's, released already, or lapsed at its timeout;
 * nothing changes), 503 when the store could not be asked (the slot lapses at its timeout).
 */
import type { Limiter } from "../limiter/limiter-api";
import type { WaitUntil } from "../limiter/types";
import { problemResponse } from "./problem";
import type { ReleaseRequest } from "./release-request";

export async function answerRelease(
  limiter: Limiter,
  release: Pick<ReleaseRequest, "policy" | "key" | "slot">,
  waitUntil?: WaitUntil,
): Promise<Response> {
  const { policy, key, slot } = release;
  const outcome = await limiter.release({ policy, key, slot }, waitUntil ? { waitUntil } : {});
  if (outcome.error !== undefined) {
    return problemResponse(503, {
      title: "Service Unavailable",
      detail: `the store could not release the slot (${outcome.retrying ? "retrying; " : ""}it lapses at its timeout otherwise)`,
    });
  }
  if (!outcome.released[0]) {
    return problemResponse(404, {
      title: "Not Found",
      detail: `no slot "${slot}" is held in rule "${policy}" for this key (released already, lapsed at its timeout, or never taken)`,
    });
  }
  return new Response(JSON.stringify({ released: true, rule: policy, slot }), {
    headers: { "Content-Type": "application/json" },
  });
}
