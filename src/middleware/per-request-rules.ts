/**
 * A middleware rule's `limit` and `cost` as functions of the request (docs/plans.md):
 * a plan's limit read from a JWT claim, a cost from the request's size. The rule is validated
 * once with stand-ins for the functions; each request's values are checked against the same
 * bounds before anything is counted.
 */
import type { Context, Env as HonoEnv } from "hono";
import * as v from "valibot";
import type { RuleConfig, RuleInput } from "../config/rule-schema";
import { costFits, integerIn } from "../config/schema-parts";
import { limitRange, maxLimitOf } from "../store/caps";

/** A value computed per request, sync or async. */
type PerRequest<E extends HonoEnv, T> = (c: Context<E>) => T | Promise<T>;

/** A middleware rule: a LIMITER_CONFIG rule whose `limit` and `cost` may be functions of `c`. */
export type RateLimitRule<E extends HonoEnv = HonoEnv> = Omit<RuleInput, "limit" | "cost"> & {
  /** Units per window, or a function of the request returning them (a plan's limit). */
  limit: RuleInput["limit"] | PerRequest<E, number>;
  /** Units this request takes, or a function of the request returning them. @default 1 */
  cost?: RuleInput["cost"] | PerRequest<E, number>;
};

interface Dynamic<E extends HonoEnv> {
  limit?: PerRequest<E, number>;
  cost?: PerRequest<E, number>;
}

/** The rules with their functions set aside: what the schema checks, and the functions by name. */
export function splitPerRequest<E extends HonoEnv>(
  rules: readonly RateLimitRule<E>[],
): { inputs: unknown[]; dynamic: Map<string, Dynamic<E>> } {
  const dynamic = new Map<string, Dynamic<E>>();
  const inputs = rules.map((rule) => {
    if (!rule || typeof rule !== "object") return rule;
    const limit = typeof rule.limit === "function" ? rule.limit : undefined;
    const cost = typeof rule.cost === "function" ? rule.cost : undefined;
    if (!limit && !cost) return rule;
    if (typeof rule.name === "string") {
      dynamic.set(rule.name, { ...(limit ? { limit } : {}), ...(cost ? { cost } : {}) });
    }
    // Stand-ins that pass the schema's cross-field checks (cost ≤ limit): the real values are
    // checked per request.
    return {
      ...rule,
      limit: limit ? (typeof rule.cost === "number" ? rule.cost : 1) : rule.limit,
      ...(cost ? { cost: 1 } : {}),
    };
  });
  return { inputs, dynamic };
}

// A rule's limit bounds, built once per rule (the parsed rule outlives every request it limits),
// not once per request.
const limitBounds = new WeakMap<RuleConfig, ReturnType<typeof integerIn>>();

function boundsOf(rule: RuleConfig): ReturnType<typeof integerIn> {
  let bounds = limitBounds.get(rule);
  if (!bounds) {
    // A usage rule's limit is in units (tokens): up to 10¹² on a window or a period too.
    const max = maxLimitOf(rule.algorithm, rule.usage);
    bounds = integerIn(1, max, limitRange(rule.algorithm, rule.usage));
    limitBounds.set(rule, bounds);
  }
  return bounds;
}

/** Why a request's value is out of bounds: the field and the reason; undefined when fine. */
function issueOf(rule: RuleConfig, limit: unknown, cost: unknown): [string, string] | undefined {
  const limitOk = v.safeParse(boundsOf(rule), limit);
  if (!limitOk.success) {
    return ["limit", `returned ${String(limit)}: ${limitOk.issues[0]?.message ?? "invalid"}`];
  }
  const units = limitOk.output;
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || !costFits(cost, units)) {
    return ["cost", `returned ${String(cost)}: must be an integer from 1 to the limit (${units})`];
  }
  return undefined;
}

/**
 * The applying rules with this request's limits and costs; `{ field, detail }` naming the first
 * function that returned a value out of bounds (nothing is counted then).
 */
export async function withRequestValues<E extends HonoEnv>(
  applying: RuleConfig[],
  dynamic: ReadonlyMap<string, Dynamic<E>>,
  c: Context<E>,
): Promise<RuleConfig[] | { field: string; detail: string }> {
  if (dynamic.size === 0) return applying;
  const out: RuleConfig[] = [];
  for (const rule of applying) {
    const fns = dynamic.get(rule.name);
    if (!fns) {
      out.push(rule);
      continue;
    }
    const limit = fns.limit ? await fns.limit(c) : rule.limit;
    const cost = fns.cost ? await fns.cost(c) : rule.cost;
    const issue = issueOf(rule, limit, cost);
    if (issue) return { field: `rules[${rule.name}].${issue[0]}`, detail: issue[1] };
    out.push({ ...rule, limit: limit as number, cost: cost as number });
  }
  return out;
}
