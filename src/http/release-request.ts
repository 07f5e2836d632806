/**
 * A POST /check/release body (docs/check-api.md): `{"rule", "key", "slot"}`, read strictly: the
 * rule a configured concurrency rule, the key as /check takes it (an "ip" rule's address grouped
 * as the proxy groups it), the slot a /check answer's. The first wrong field is named.
 */
import * as v from "valibot";
import { unknownFieldDetail } from "../config/field-suggestion";
import type { RuleConfig } from "../config/rule-schema";
import { clientKeySchema } from "../config/schema-parts";
import {
  illFormedString,
  invalid,
  isPlainObject,
  unknownField,
  type Validated,
} from "../config/validation";
import type { ConcurrencySlot } from "../limiter/types";
import { isConcurrency } from "../store/algorithm";

/** The fields a release body holds. */
const RELEASE_FIELDS = ["rule", "key", "slot"] as const;

/** Slot ids are short (22 random characters; `r:` and a request id from older records). */
const MAX_SLOT_LENGTH = 1_024;
const SLOT = `must be a non-empty string of at most ${MAX_SLOT_LENGTH} characters (a /check answer's "slot")`;
const slotSchema = v.pipe(v.string(SLOT), v.minLength(1, SLOT), v.maxLength(MAX_SLOT_LENGTH, SLOT));

/** A valid release: the slot, with the rule it was taken under (its key still raw). */
export interface ReleaseRequest extends Pick<ConcurrencySlot, "policy" | "key" | "slot"> {
  rule: RuleConfig;
}

/** Reads a parsed release body; nothing is released for one that is not valid. */
export function parseReleaseBody(
  body: unknown,
  rules: ReadonlyMap<string, RuleConfig>,
): Validated<ReleaseRequest> {
  if (!isPlainObject(body)) return invalid("body", "must be a JSON object");
  const illFormed = illFormedString(body, "body");
  if (illFormed) return illFormed;
  const extra = unknownField(body, RELEASE_FIELDS);
  if (extra) return invalid(extra, unknownFieldDetail(extra, RELEASE_FIELDS));
  if (typeof body.rule !== "string") {
    return invalid("rule", body.rule === undefined ? "is required" : "must be a string");
  }
  const rule = rules.get(body.rule);
  if (!rule) return invalid("rule", `unknown rule "${body.rule}"`);
  if (!isConcurrency(rule.algorithm)) {
    return invalid("rule", `"${rule.name}" is not a concurrency rule: it holds no slots`);
  }
  const key = v.safeParse(clientKeySchema, body.key);
  if (!key.success)
    return invalid("key", body.key === undefined ? "is required" : firstMessage(key.issues));
  const slot = v.safeParse(slotSchema, body.slot);
  if (!slot.success) return invalid("slot", body.slot === undefined ? "is required" : SLOT);
  return { ok: true, value: { rule, policy: rule.name, key: key.output, slot: slot.output } };
}

function firstMessage(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues[0]?.message ?? "is invalid";
}
