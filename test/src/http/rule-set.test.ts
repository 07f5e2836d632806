// The server entry's pieces for an HTTP surface of one's own (the worker is built on them):
// createRules over parseConfig, and readJsonBody. Imported from "edge-limiter/server", as a user
// does; real workerd, real Redis through the bridge.
import { createLimiter } from "edge-limiter";
import { createRules, parseConfig, readJsonBody } from "edge-limiter/server";
import { describe, expect, it } from "vitest";
import { scopedPrefix, testStore } from "../../support/worker/redis";

const prefix = scopedPrefix("rule-set");

function configOf(raw: unknown) {
  const parsed = parseConfig(raw);
  if (!parsed.ok) throw new Error(`${parsed.field} ${parsed.detail}`);
  return parsed.value;
}

const config = configOf({
  rules: [
    { name: "api", match: { path: "/api/*" }, limit: 2, window: "1m", key: "header:x-api-key" },
    { name: "by-ip", match: { path: "/ip/*" }, limit: 5, window: "1m", key: "ip" },
  ],
});

describe("createRules: guard in front of an origin", () => {
  const limiter = createLimiter({ store: testStore(), prefix, denialCache: false });
  const rules = createRules(config);

  it("forwards a request no rule matches untouched, without headers or a store call", async () => {
    let forwarded = 0;
    const origin = new Response("origin", { status: 201 });
    const answer = await rules.guard(new Request("https://example.com/other"), {
      limiter: { ...limiter, limitAll: () => Promise.reject(new Error("no store call")) },
      forward: async () => {
        forwarded++;
        return origin;
      },
    });
    expect(forwarded).toBe(1);
    expect(answer).toBe(origin);
  });

  it("decides a matching request: headers on what passes, a 429 that never reaches the origin", async () => {
    const key = `k-${crypto.randomUUID()}`;
    let forwarded = 0;
    const send = () =>
      rules.guard(new Request("https://example.com/api/x", { headers: { "x-api-key": key } }), {
        limiter,
        forward: async () => {
          forwarded++;
          return new Response("ok");
        },
      });
    const first = await send();
    expect(first.status).toBe(200);
    expect(first.headers.get("RateLimit")).toContain("r=1");
    expect((await send()).status).toBe(200);
    const third = await send();
    expect(third.status).toBe(429);
    expect(third.headers.get("Content-Type")).toBe("application/problem+json");
    expect(forwarded).toBe(2);
  });

  it("keys a raw key as the proxy keys it: a header hashed, an address grouped", async () => {
    const [api, byIp] = [rules.rule("api"), rules.rule("by-ip")];
    if (!api || !byIp) throw new Error("rules missing");
    const hashed = await rules.keyOf(api, "secret-key");
    expect(hashed).not.toContain("secret-key");
    expect(await rules.keyOf(api, "secret-key")).toBe(hashed);
    expect(await rules.keyOf(byIp, "2001:db8::1")).toBe(await rules.keyOf(byIp, "2001:db8::2"));
    expect(await rules.keyOf(byIp, "192.0.2.1")).not.toBe(await rules.keyOf(byIp, "192.0.2.2"));
  });

  it("reads a /check body strictly, naming the first wrong field, keys already keyed", async () => {
    const bad = await rules.parseCheck({ key: "k", rule: "nope" }, "");
    expect(bad).toMatchObject({ ok: false, field: "rule" });
    const good = await rules.parseCheck({ key: "raw", rule: "api" }, "");
    const api = rules.rule("api");
    if (!api) throw new Error("rule missing");
    expect(good.ok && good.value.requests[0]?.key).toBe(await rules.keyOf(api, "raw"));
    expect(good.ok && good.value.named).toBe(true);
  });
});

describe("readJsonBody", () => {
  const post = (body: BodyInit, headers: Record<string, string> = {}) =>
    new Request("https://example.com/", {
      method: "POST",
      body,
      headers: { "Content-Type": "application/json", ...headers },
    });

  it("refuses what is not JSON, too large, or not the object asked for, naming why", async () => {
    const wrongType = await readJsonBody(post("{}", { "Content-Type": "text/plain" }), {
      maxBytes: 64,
    });
    expect(!wrongType.ok && wrongType.response.status).toBe(415);

    // No Content-Length: read as a stream, stopped at the cap, never buffered whole.
    const stream = new ReadableStream({
      pull(controller) {
        controller.enqueue(new TextEncoder().encode("x".repeat(32)));
      },
    });
    const tooLarge = await readJsonBody(post(stream), { maxBytes: 64 });
    expect(!tooLarge.ok && tooLarge.response.status).toBe(413);

    const extra = await readJsonBody(post('{"a":1,"b":2}'), { maxBytes: 64, fields: ["a"] });
    expect(extra.ok).toBe(false);
    if (!extra.ok) expect(await extra.response.json()).toMatchObject({ status: 400, field: "b" });

    const lone = await readJsonBody(post('{"a":"\\ud800"}'), { maxBytes: 64, fields: ["a"] });
    expect(lone.ok).toBe(false);
    if (!lone.ok) expect(await lone.response.json()).toMatchObject({ field: "a" });
  });

  it("answers the JSON and its text when the body is good", async () => {
    const read = await readJsonBody(post('{"a":"b"}'), { maxBytes: 64, fields: ["a"] });
    expect(read).toEqual({ ok: true, json: { a: "b" }, text: '{"a":"b"}' });
  });
});
