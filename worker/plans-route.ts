/**
 * The plans admin routes (docs/plans.md), for a caller holding LIMITER_ADMIN_TOKEN: a rule's limit for one
 * client key, key blocks, network blocks, and the listing of all three. A key is given raw and
 * keyed as the proxy keys it (a header rule's value hashed, an "ip" rule's address grouped), so
 * the change reaches the log the proxy counts in.
 */

import type { NetworkChange, PlanChange } from "edge-limiter";
import type { RuleConfig } from "edge-limiter/server";
import { problemResponse } from "edge-limiter/server";
import type { Context } from "hono";
import { storeUnavailable } from "./admin-route";
import { authorizedJson } from "./authorized-check";
import { authorizedReader } from "./dashboard-auth";
import type { Env } from "./env";
import type { ReadyRuntime } from "./runtime";

type Body = Record<string, unknown>;

/**
 * The most entries one page may ask for: the limiter's own cap on a page (plans.list clamps to
 * it), refused here with a reason rather than clamped.
 */
const MAX_LIST_COUNT = 1_000;

/** The largest cursor HSCAN takes (2^64 - 1). */
const MAX_CURSOR = 18_446_744_073_709_551_615n;

/**
 * POST /check/override `{"rule", "key", "limit", "anchor"?}`: `"limit": null` removes the
 * override; `anchor` (an ISO-8601 instant) is a calendar rule's key's own (its billing day).
 */
export async function overrideHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const read = await adminBody(c, ["rule", "key", "limit", "anchor"]);
  if (!read.ok) return read.response;
  const { runtime, body } = read;
  const rule = optedRule(runtime, body.rule);
  if (!rule.ok) return rule.response;
  if (typeof body.key !== "string" || body.key.length === 0)
    return bad("key", "must be a non-empty string");
  if (body.limit === undefined) return bad("limit", "is required (null removes the override)");
  if (body.limit !== null && typeof body.limit !== "number")
    return bad("limit", "must be an integer or null");
  const anchor = body.anchor;
  if (anchor !== undefined && (typeof anchor !== "string" || body.limit === null)) {
    return bad("anchor", "must be an ISO-8601 instant, given with a limit");
  }
  const key = await runtime.rules.keyOf(rule.rule, body.key);
  const { name, algorithm } = rule.rule;
  const limit = body.limit;
  const raw = body.key;
  return answer(runtime, [rule.rule], key, async () => {
    if (limit === null) return runtime.limiter.overrides.remove(name, key);
    const usage = rule.rule.usage !== undefined;
    const set = await runtime.limiter.overrides.set(name, key, { limit, algorithm, anchor, usage });
    if (set.ok) await runtime.keyLabels?.remember(key, raw);
    return set;
  });
}

/** POST /check/block `{"rule"?, "key" | "ip" | "country" | "asn", "seconds"?}`. */
export function blockHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  return blockChange(c, true);
}

/** POST /check/unblock `{"rule"?, "key" | "ip" | "country" | "asn"}`. */
export function unblockHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  return blockChange(c, false);
}

async function blockChange(c: Context<{ Bindings: Env }>, block: boolean): Promise<Response> {
  const fields = ["rule", "key", "ip", "country", "asn", ...(block ? ["seconds"] : [])];
  const read = await adminBody(c, fields);
  if (!read.ok) return read.response;
  const { runtime, body } = read;
  const targets = ["key", "ip", "country", "asn"].filter((name) => body[name] !== undefined);
  if (targets.length !== 1) {
    return bad("key", 'give exactly one of "key", "ip", "country", "asn"');
  }
  const seconds = body.seconds;
  if (seconds !== undefined && typeof seconds !== "number")
    return bad("seconds", "must be an integer");

  if (body.key !== undefined) {
    if (typeof body.key !== "string" || body.key.length === 0)
      return bad("key", "must be a non-empty string");
    // A key block lives beside the overrides: read by the rules with `overrides: true`.
    let rules: RuleConfig[];
    if (body.rule === undefined) {
      rules = runtime.config.rules.filter((rule) => rule.overrides);
      if (rules.length === 0) {
        return bad(
          "rule",
          'no rule has "overrides": true, and key blocks are read by those rules only',
        );
      }
    } else {
      const rule = optedRule(runtime, body.rule);
      if (!rule.ok) return rule.response;
      rules = [rule.rule];
    }
    const keys: { rule: RuleConfig; policy: string; key: string }[] = [];
    for (const rule of rules) {
      keys.push({ rule, policy: rule.name, key: await runtime.rules.keyOf(rule, body.key) });
    }
    // One script call for every rule's field: a refusal or a failure writes none of them.
    const changed = await storeCall(() =>
      block
        ? runtime.limiter.blocks.add(keys, { seconds: seconds as number | undefined })
        : runtime.limiter.blocks.remove(keys),
    );
    if (changed.ok) for (const { rule, key } of keys) forgetHere(runtime, rule, key);
    if (changed.ok && block && runtime.keyLabels) {
      const raw = body.key;
      const labelled = await storeCall(async () => {
        for (const { key } of keys) await runtime.keyLabels?.remember(key, raw);
        return changed;
      });
      return changeAnswer(labelled, rules);
    }
    return changeAnswer(changed, rules);
  }

  if (!runtime.networkBlocks) {
    return bad("body", 'network blocks are off: set "networkBlocks": true in LIMITER_CONFIG');
  }
  let rule: RuleConfig | undefined;
  if (body.rule !== undefined) {
    rule = typeof body.rule === "string" ? runtime.rules.rule(body.rule) : undefined;
    if (!rule) return bad("rule", "must name a configured rule (or be left out: every rule)");
  }
  const [kind] = targets as ["ip" | "country" | "asn"];
  const target = { by: kind, value: body[kind] as string | number, policy: rule?.name };
  // This isolate's copy (the limiter's) reloads on its next request; the others' within their
  // refresh.
  const changed = await storeCall(() =>
    block
      ? runtime.limiter.networks.add({ ...target, seconds: seconds as number | undefined })
      : runtime.limiter.networks.remove(target),
  );
  if (!changed.ok) return changeAnswer(changed, rule ? [rule] : runtime.config.rules);
  return Response.json({
    ok: true,
    existed: changed.existed,
    [kind]: changed.value,
    rule: rule?.name ?? null,
  });
}

/**
 * GET /check/plans?what=overrides|blocks|network&cursor=0&count=100&rule=<name>: one page; the
 * answer's `cursor` "0" ends the listing.
 */
export async function plansListHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const authorized = await authorizedReader(c);
  if (!authorized.ok) return authorized.response;
  const { runtime } = authorized;
  const what = c.req.query("what") ?? "overrides";
  if (what !== "overrides" && what !== "blocks" && what !== "network") {
    return bad("what", 'must be "overrides", "blocks" or "network"');
  }
  const cursor = c.req.query("cursor") ?? "0";
  // A Redis cursor is an unsigned 64-bit number: a larger one is the store's error, not a page.
  // With shards a page's cursor is `<shard index>:<cursor>` (the listing walks every shard, one
  // after the other), so that form is one a page answered, with an index below the shards'.
  const scan = /^(?:(\d{1,2}):)?(\d{1,20})$/.exec(cursor);
  const shardIndex = scan?.[1] === undefined ? undefined : Number(scan[1]);
  if (
    !scan ||
    BigInt(scan[2] as string) > MAX_CURSOR ||
    (shardIndex !== undefined && shardIndex >= (runtime.config.shards?.length ?? 0))
  ) {
    return bad("cursor", "must be the cursor a page answered");
  }
  const countText = c.req.query("count") ?? "100";
  const count = Number(countText);
  if (!/^\d+$/.test(countText) || count < 1 || count > MAX_LIST_COUNT) {
    return bad("count", `must be an integer from 1 to ${MAX_LIST_COUNT}`);
  }
  const rule = c.req.query("rule");
  if (rule !== undefined && !runtime.rules.rule(rule))
    return bad("rule", "must name a configured rule");
  try {
    const page = await runtime.limiter.plans.list({ what, cursor, count, policy: rule });
    if (!runtime.keyLabels || what === "network") return Response.json(page);
    // analytics.keyLabels: each key's raw value, as the admin set it, beside its digest.
    const labels = await runtime.keyLabels.read([...new Set(page.entries.map((e) => e.value))]);
    return Response.json({
      ...page,
      entries: page.entries.map((entry) => {
        const label = labels.get(entry.value);
        return label === undefined ? entry : { ...entry, label };
      }),
    });
  } catch (error) {
    return storeUnavailable(error);
  }
}

/** The admin token, the JSON body, and no field but these. */
async function adminBody(
  c: Context<{ Bindings: Env }>,
  fields: readonly string[],
): Promise<{ ok: true; runtime: ReadyRuntime; body: Body } | { ok: false; response: Response }> {
  const read = await authorizedJson(c.req.raw, c.env, "admin", fields);
  if (!read.ok) return read;
  return { ok: true, runtime: read.runtime, body: read.json as Body };
}

/** A configured rule that reads overrides (key blocks live beside them). */
function optedRule(
  runtime: ReadyRuntime,
  name: unknown,
): { ok: true; rule: RuleConfig } | { ok: false; response: Response } {
  const rule = typeof name === "string" ? runtime.rules.rule(name) : undefined;
  if (!rule) return { ok: false, response: bad("rule", "must name a configured rule") };
  if (!rule.overrides) {
    return {
      ok: false,
      response: bad("rule", `"${rule.name}" does not read overrides: set "overrides": true on it`),
    };
  }
  return { ok: true, rule };
}

async function answer(
  runtime: ReadyRuntime,
  rules: RuleConfig[],
  key: string,
  change: () => Promise<PlanChange>,
): Promise<Response> {
  const changed = await storeCall(change);
  if (changed.ok) for (const rule of rules) forgetHere(runtime, rule, key);
  return changeAnswer(changed, rules);
}

/** This isolate forgets what it remembers of the key (a denial, a block): the change applies here at once. */
function forgetHere(runtime: ReadyRuntime, rule: RuleConfig, key: string): void {
  const { name, limit, windowMs, algorithm } = rule;
  runtime.limiter.forget({ policy: name, key, limit, windowMs, algorithm });
}

/** A store failure as a change that was not made (503). */
async function storeCall<T extends PlanChange | NetworkChange>(
  change: () => Promise<T>,
): Promise<T | StoreDown> {
  try {
    return await change();
  } catch (error) {
    return { ok: false, field: "", detail: "", down: error };
  }
}

type StoreDown = { ok: false; field: ""; detail: ""; down: unknown };

function changeAnswer(
  changed: PlanChange | NetworkChange | StoreDown,
  rules: readonly RuleConfig[],
): Response {
  if ("down" in changed) return storeUnavailable(changed.down);
  if (!changed.ok) {
    return changed.field === "body"
      ? problemResponse(409, { title: "Conflict", detail: changed.detail })
      : bad(changed.field, changed.detail);
  }
  return Response.json({
    ok: true,
    existed: changed.existed,
    rules: rules.map((rule) => rule.name),
  });
}

function bad(field: string, detail: string): Response {
  return problemResponse(400, { title: "Bad Request", detail: `${field} ${detail}`, field });
}
