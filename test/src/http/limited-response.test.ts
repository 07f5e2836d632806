import { describe, expect, it } from "vitest";
import { withRateLimitHeaders } from "../../../src/http/rate-limit-headers";

const limitHeaders = () => ({
  "RateLimit-Policy": '"api";q=10;w=60',
  RateLimit: '"api";r=9;t=60',
});

describe("withRateLimitHeaders", () => {
  it("keeps a 101 WebSocket upgrade's socket while adding the headers (workerd copies it)", () => {
    const pair = new WebSocketPair();
    const upgrade = new Response(null, { status: 101, webSocket: pair[0] });
    const out = withRateLimitHeaders(upgrade, limitHeaders());
    expect(out.status).toBe(101);
    expect(out.webSocket).toBe(pair[0]);
    expect(out.headers.get("RateLimit")).toBe('"api";r=9;t=60');
    pair[1].accept();
    pair[1].close();
  });

  it("adds the headers to any other response, keeping status and headers", async () => {
    const original = new Response("body", { status: 503, headers: { "X-Origin": "1" } });
    const out = withRateLimitHeaders(original, limitHeaders());
    expect(out.status).toBe(503);
    expect(out.headers.get("X-Origin")).toBe("1");
    expect(out.headers.get("RateLimit")).toBe('"api";r=9;t=60');
    expect(await out.text()).toBe("body");
  });
});
