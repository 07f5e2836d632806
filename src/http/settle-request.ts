/**
 * A POST /check/settle body `{"receipt", "usage"}` (docs/usage.md), read strictly: the first
 * wrong field is named and nothing is counted. The receipt is checked to be one this deployment
 * handed out (usage-receipt.ts) before anything is asked of the store.
 */
import { unknownFieldDetail } from "../config/field-suggestion";
import { invalid, isPlainObject, unknownField, type Validated } from "../config/validation";
import { isUsage, USAGE_RANGE } from "../limiter/settle-receipt";
import type { RefundReceipt } from "../limiter/types";
import { MAX_RECEIPT_LENGTH, openReceipt } from "./usage-receipt";

const FIELDS = ["receipt", "usage"] as const;

/** A settle to make: the receipt opened, and the units the request used. */
export interface SettleRequest {
  receipt: RefundReceipt;
  usage: number;
}

export async function parseSettleBody(
  body: unknown,
  secret: string,
): Promise<Validated<SettleRequest>> {
  if (!isPlainObject(body)) return invalid("body", "must be a JSON object");
  const extra = unknownField(body, FIELDS);
  if (extra) return invalid(extra, unknownFieldDetail(extra, FIELDS));
  const { receipt, usage } = body;
  if (typeof receipt !== "string" || receipt.length === 0 || receipt.length > MAX_RECEIPT_LENGTH) {
    return invalid("receipt", `must be the "receipt" string a /check answer handed out`);
  }
  if (!isUsage(usage)) return invalid("usage", USAGE_RANGE);
  const opened = await openReceipt(receipt, secret);
  if (!opened) return invalid("receipt", "is not a receipt this deployment handed out");
  return { ok: true, value: { receipt: opened, usage } };
}
