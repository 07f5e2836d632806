import { SELF } from "cloudflare:test";
import { expect, it } from "vitest";

it("serves", async () => {
  const res = await SELF.fetch("http://x/");
  expect(await res.text()).toBe("edge-limiter");
});
