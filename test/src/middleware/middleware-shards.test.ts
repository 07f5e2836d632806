/**
 * The middleware over a sharded limiter (docs/shards.md): `rateLimit({ limiter })` with
 * `createLimiter({ store: [three databases] })`. A request whose rules are keyed by two clients
 * living on two shards is decided on both, all or nothing; a 5xx's refund goes back to the shard
 * that counted it; the headers say what each shard holds.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createLimiter, type RateLimitVariables, rateLimit } from "../../../src/index";
import { storeAt } from "../../support/worker/fault-control";
import { shardPrefix, shardUrls } from "../../support/worker/shard-stores";

const prefix = shardPrefix("mw-shards");

const remaining = (response: Response) =>
  Object.fromEntries(
    [...(response.headers.get("RateLimit") ?? "").matchAll(/"([^"]+)";r=(\d+)/g)].map(
      ([, policy, r]) => [policy, Number(r)],
    ),
  );

describe("rateLimit over a sharded limiter", () => {
  it("decides each client's rule on its shard, all or nothing, and refunds a 5xx there", async () => {
    const limiter = createLimiter({
      store: shardUrls().map((url) => storeAt(url, 2_000)),
      prefix,
      timeoutMs: 2_000,
      failMode: "closed",
      denialCache: false,
    });
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.use(
      rateLimit({
        limiter,
        rules: [
          { name: "mw-user", limit: 2, window: "1m", key: "header:x-user", refundOn: "5xx" },
          { name: "mw-org", limit: 100, window: "1m", key: "header:x-org" },
        ],
      }),
    );
    app.get("/ok", (c) => c.json(c.get("rateLimit").decisions.map((d) => d.shard)));
    app.get("/fail", (c) => c.text("origin failed", 500));
    const org = `org-${crypto.randomUUID()}`;
    const call = (path: string, user: string) =>
      app.request(path, { headers: { "x-user": user, "x-org": org } });

    // A user whose shard is not the org's (each try is a fresh user: one unit each).
    let user = "";
    let orgUsed = 0;
    for (let i = 0; ; i++) {
      user = `user-${i}-${crypto.randomUUID()}`;
      const res = await call("/ok", user);
      orgUsed++;
      expect(res.status).toBe(200);
      const [userShard, orgShard] = await res.json<string[]>();
      expect(["0", "1", "2"]).toContain(userShard);
      if (userShard !== orgShard) break;
    }
    // A 5xx: the user's unit is given back on its shard, the org's kept on its own.
    const failed = await call("/fail", user);
    orgUsed++;
    expect(failed.status).toBe(500);
    expect(remaining(failed)).toEqual({ "mw-user": 1, "mw-org": 100 - orgUsed });
    // The user's second unit, then a denial by the user's shard: the org's part, admitted on
    // the other shard, is given back, so the org's count does not move.
    const ok = await call("/ok", user);
    orgUsed++;
    expect(ok.status).toBe(200);
    expect(remaining(ok)).toEqual({ "mw-user": 0, "mw-org": 100 - orgUsed });
    const denied = await call("/ok", user);
    expect(denied.status).toBe(429);
    const other = await call("/ok", `other-${crypto.randomUUID()}`);
    orgUsed++;
    expect(remaining(other)["mw-org"]).toBe(100 - orgUsed);
  });
});
