/**
 * src/http/json-usage.ts: a JSON body's copy stays within its cap (a body past it is given up at
 * once, whatever its length), and is read only when the body ended normally.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_JSON_BYTES, JsonUsageCollector } from "../../../src/http/json-usage";
import { compilePaths } from "../../../src/http/usage-paths";

const bytes = (text: string) => new TextEncoder().encode(text);

describe("JsonUsageCollector", () => {
  it("holds at most its cap over a 10 MB body, and then reads nothing", () => {
    const collector = new JsonUsageCollector(compilePaths("n"));
    const chunk = bytes(`{"pad":"${"p".repeat(16 * 1024)}",`);
    for (let fed = 0; fed < 10 * 1024 * 1024; fed += chunk.length) {
      collector.push(chunk);
      expect(collector.bufferedBytes).toBeLessThanOrEqual(DEFAULT_MAX_JSON_BYTES);
    }
    collector.push(bytes('"n":3}'));
    expect(collector.peakBufferedBytes).toBeLessThanOrEqual(DEFAULT_MAX_JSON_BYTES);
    expect(collector.finish(true)).toBeUndefined();
    expect(collector.bufferedBytes).toBe(0);
  });

  it("reads a body split anywhere, a multi-byte character cut included, only if it ended", () => {
    const body = bytes('{"name":"é€𝄞","usage":{"n":7}}');
    for (let cut = 1; cut < body.length; cut++) {
      const collector = new JsonUsageCollector(compilePaths("usage.n"));
      collector.push(body.subarray(0, cut));
      collector.push(body.subarray(cut));
      expect(collector.finish(true), `cut at ${cut}`).toBe(7);
    }
    const cut = new JsonUsageCollector(compilePaths("usage.n"));
    cut.push(body);
    expect(cut.finish(false)).toBeUndefined();
  });
});
