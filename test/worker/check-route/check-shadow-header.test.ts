import { describe, expect, it } from "vitest";
import { scopedPrefix } from "../../support/worker/redis";
import { originUrl, postCheck, workerWith } from "../../support/worker/worker-harness";

// /check names rules as the proxy applies them: a shadow rule never denies, and a header rule
// takes the raw header value and keys it as the proxy does, so /check, peek and reset reach the
// proxy's log for that customer.
const prefix = scopedPrefix("check-shadow");
const run = crypto.randomUUID().slice(0, 8);
const LIMITER_CONFIG = JSON.stringify({
  prefix,
  rules: [
    { name: "quota", limit: 1, window: "1h", key: "header:x-api-key", shadow: true },
    { name: "per-key", limit: 2, window: "1h", key: "header:x-api-key", match: { path: "/k/*" } },
  ],
});
const worker = workerWith({ LIMITER_CONFIG, ORIGIN_URL: originUrl() });

describe("/check with a shadow rule", () => {
  it("allows what the shadow rule would deny, and says so", async () => {
    const key = `shadow-${run}`;
    const first = await postCheck(worker, { key, rule: "quota" });
    expect(first.status).toBe(200);
    expect(await first.json()).not.toHaveProperty("shadowDenied");
    for (let i = 0; i < 2; i++) {
      const res = await postCheck(worker, { key, rule: "quota" });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ allowed: true, shadowDenied: ["quota"] });
      expect(res.headers.has("Retry-After")).toBe(false);
    }
  });

  it("beside an enforced rule: the enforced one decides and counts, the shadow one reports", async () => {
    const key = `mixed-${run}`;
    const statuses: number[] = [];
    const shadowed: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await postCheck(worker, { key, rules: ["per-key", "quota"] });
      statuses.push(res.status);
      shadowed.push(((await res.json()) as { shadowDenied?: string[] }).shadowDenied);
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(shadowed).toEqual([undefined, ["quota"], ["quota"]]);
  });
});

describe("/check with a header rule takes the raw value", () => {
  it("counts in the proxy's log for that header value; peek and reset reach it too", async () => {
    const apiKey = `cust-${run}`;
    // The proxy counts two requests carrying the header (limit 2)...
    for (let i = 0; i < 2; i++) {
      const res = await worker("/k/items", { headers: { "X-API-Key": apiKey } });
      expect(res.status).not.toBe(429);
    }
    // ...so /check with the raw value finds the log full,
    const peek = await postCheck(worker, { key: apiKey, rule: "per-key" }, { path: "/check/peek" });
    expect(await peek.json()).toMatchObject({ allowed: false, remaining: 0 });
    expect((await postCheck(worker, { key: apiKey, rule: "per-key" })).status).toBe(429);
    // and "reset customer X" resets the proxy's counter.
    const reset = await postCheck(
      worker,
      { key: apiKey, rule: "per-key" },
      { path: "/check/reset" },
    );
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    expect((await worker("/k/items", { headers: { "X-API-Key": apiKey } })).status).not.toBe(429);
  });
});
