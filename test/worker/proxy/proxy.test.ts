import { describe, expect, it } from "vitest";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { originCount, originUrl, workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("proxy");
const run = crypto.randomUUID().slice(0, 8);

const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    rules: [
      { name: "api", match: { path: "/api/*" }, limit: 2, window: "1m", key: "ip" },
      {
        name: "writes",
        match: { path: ["/echo/*", "/status/*"], methods: ["POST", "PUT"] },
        limit: 100,
        window: "1m",
      },
    ],
  }),
});

const ip = (n: number) => ({ "CF-Connecting-IP": `198.51.100.${n}` });

describe("proxy in front of an origin", () => {
  it("passes requests no rule matches untouched: no headers, no store call", async () => {
    const res = await worker(`/plain/${run}`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(`origin /plain/${run}`);
    expect(res.headers.has("RateLimit-Policy")).toBe(false);
    expect(res.headers.has("RateLimit")).toBe(false);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
  });

  it("passes method, path, query, headers and a POST body through, and adds the headers", async () => {
    const body = JSON.stringify({ hello: "world", run });
    const res = await worker(`/echo/post-${run}?a=1&b=two`, {
      method: "POST",
      headers: { ...ip(1), "Content-Type": "application/json", "X-Custom": "kept" },
      body,
    });
    expect(res.status).toBe(200);
    const echo = await res.json<{
      method: string;
      path: string;
      query: string;
      headers: Record<string, string>;
      body: string;
    }>();
    expect(echo).toMatchObject({
      method: "POST",
      path: `/echo/post-${run}`,
      query: "?a=1&b=two",
      body,
    });
    expect(echo.headers["x-custom"]).toBe("kept");
    expect(echo.headers["content-type"]).toBe("application/json");
    expect(res.headers.get("RateLimit-Policy")).toBe('"writes";q=100;w=60');
    expect(res.headers.get("RateLimit")).toMatch(/^"writes";r=99;t=(59|60)$/);
  });

  it("passes statuses through: 201 with Location, 304 without a body, 302 not followed", async () => {
    const created = await worker(`/status/201`, { method: "POST", headers: ip(2), body: "x" });
    expect(created.status).toBe(201);
    expect(created.headers.get("Location")).toBe("/created/1");
    expect(await created.text()).toBe("status 201");
    expect(created.headers.has("RateLimit")).toBe(true);

    const notModified = await worker(`/status/304`, { headers: { "If-None-Match": '"v1"' } });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get("ETag")).toBe('"v1"');
    expect(await notModified.text()).toBe("");

    const redirect = await worker(`/redirect`);
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("Location")).toBe("/echo/redirected");
  });

  it("keeps every Set-Cookie header", async () => {
    const res = await worker(`/cookies/${run}`);
    expect(res.headers.getAll("Set-Cookie")).toEqual([
      "a=1; Path=/; HttpOnly",
      "b=2; Path=/; Secure",
    ]);
    expect(res.headers.get("X-Custom")).toBe("kept");
  });

  it("streams the response: the first byte arrives before the origin has finished", async () => {
    const id = `s-${run}`;
    const res = await worker(`/stream/${id}`);
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    // The origin holds the rest until /release: reading "first" proves nothing was buffered.
    const first = await reader.read();
    expect(decoder.decode(first.value)).toBe("first\n");
    await fetch(`${originUrl()}/release/${id}`);
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += decoder.decode(value, { stream: true });
    }
    expect(rest).toBe("rest\n");
  });

  it("answers 429 problem+json with the headers, without calling the origin", async () => {
    const path = `/api/limited-${run}`;
    expect((await worker(path, { headers: ip(3) })).status).toBe(200);
    expect((await worker(path, { headers: ip(3) })).status).toBe(200);
    const denied = await worker(path, { headers: ip(3) });
    expect(denied.status).toBe(429);
    expect(denied.headers.get("Content-Type")).toContain("application/problem+json");
    expect(denied.headers.get("RateLimit-Policy")).toBe('"api";q=2;w=60');
    expect(denied.headers.get("RateLimit")).toMatch(/^"api";r=0;t=(59|60)$/);
    const retryAfter = Number(denied.headers.get("Retry-After"));
    const body = await denied.json<{ status: number; violated: string[]; retryAfterMs: number }>();
    expect(body).toMatchObject({ status: 429, violated: ["api"] });
    expect(retryAfter).toBe(Math.ceil(body.retryAfterMs / 1000));
    expect(retryAfter).toBeGreaterThanOrEqual(59);
    expect(await originCount(path)).toBe(2);
    // Another client is not affected.
    expect((await worker(path, { headers: ip(4) })).status).toBe(200);
  });

  it("cancels a refused request's upload: its body is never read", async () => {
    const path = `/api/upload-${run}`;
    for (let i = 0; i < 2; i++) expect((await worker(path, { headers: ip(7) })).status).toBe(200);
    let cancelled = false;
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls++;
        controller.enqueue(new TextEncoder().encode("chunk"));
      },
      cancel() {
        cancelled = true;
      },
    });
    const denied = await worker(path, { method: "POST", headers: ip(7), body });
    expect(denied.status).toBe(429);
    expect(cancelled).toBe(true);
    expect(await originCount(path)).toBe(2);
    expect(pulls).toBeLessThanOrEqual(1);
  });

  it("applies every matching rule: the request passes only if all allow", async () => {
    const both = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        rules: [
          { name: "loose", match: { path: "/both/*" }, limit: 10, window: "1m" },
          { name: "tight", match: { path: "/both/*", methods: ["POST"] }, limit: 1, window: "1m" },
        ],
      }),
    });
    const path = `/both/${run}`;
    const get = await both(path, { headers: ip(5) });
    expect(get.headers.get("RateLimit-Policy")).toBe('"loose";q=10;w=60');
    const post = await both(path, { method: "POST", headers: ip(5), body: "1" });
    expect(post.status).toBe(200);
    expect(post.headers.get("RateLimit-Policy")).toBe('"loose";q=10;w=60, "tight";q=1;w=60');
    const denied = await both(path, { method: "POST", headers: ip(5), body: "2" });
    expect(denied.status).toBe(429);
    expect(await denied.json()).toMatchObject({ violated: ["tight"] });
    expect((await both(path, { headers: ip(5) })).status).toBe(200);
    expect(await originCount(path)).toBe(3);
  });

  it("answers 502 No origin before counting: under wrangler dev without ORIGIN_URL nothing is consumed", async () => {
    const noOrigin = workerWith({
      ORIGIN_URL: undefined,
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        rules: [{ name: "no-origin", match: { path: "/api/*" }, limit: 1, window: "1m" }],
      }),
    });
    // The same client twice over a limit of 1: the second would be a 429 had the first counted.
    for (let i = 0; i < 2; i++) {
      const res = await noOrigin(`http://127.0.0.1:8787/api/no-origin-${run}`, {
        method: "POST",
        headers: ip(8),
        body: "x",
      });
      expect(res.status).toBe(502);
      expect(await res.json()).toMatchObject({ status: 502, title: "No origin" });
      expect(res.headers.has("RateLimit")).toBe(false);
    }
    expect(await redis.keys(`${prefix}:no-origin*`)).toEqual([]);
  });

  it("matches percent-encoded and doubled-slash spellings of a limited path", async () => {
    const tight = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        rules: [{ name: "admin", match: { path: "/admin/*" }, limit: 1, window: "1m" }],
      }),
    });
    expect((await tight(`/admin/x`, { headers: ip(6) })).status).toBe(200);
    expect((await tight(`/%61dmin/x`, { headers: ip(6) })).status).toBe(429);
    expect((await tight(`https://limited.test//admin/x`, { headers: ip(6) })).status).toBe(429);
  });
});
