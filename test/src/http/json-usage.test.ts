/**
 * src/http/json-usage.ts, on its own and through readUsage: a JSON body's paths are summed
 * wherever its chunks split; its copy stays within the cap (a body past it is given up at once,
 * whatever its length, and still passed through), and is read only when the body ended normally.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_JSON_BYTES, JsonUsageCollector } from "../../../src/http/json-usage";
import { compilePaths } from "../../../src/http/usage-paths";
import { readUsage } from "../../../src/http/usage-reader";

const bytes = (text: string) => new TextEncoder().encode(text);
const json = { "Content-Type": "application/json" };

/** A response whose body yields exactly these chunks. */
function responseOf(chunks: string[], init: ResponseInit): Response {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(bytes(chunk));
      controller.close();
    },
  });
  return new Response(body, init);
}

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

describe("readUsage: a JSON body", () => {
  const body = JSON.stringify({ id: "x", usage: { prompt_tokens: 9, completion_tokens: 3 } });
  const paths = { json: ["usage.prompt_tokens", "usage.completion_tokens"] };

  it("sums the paths of a JSON body split anywhere, for +json types and a charset too", async () => {
    for (const type of [
      "application/json",
      "application/json; charset=utf-8",
      "application/vnd.x+json",
    ]) {
      for (let cut = 1; cut < body.length; cut += 7) {
        const origin = responseOf([body.slice(0, cut), body.slice(cut)], {
          headers: { "Content-Type": type },
        });
        const { response, usage } = readUsage(origin, paths);
        expect(await response.text()).toBe(body);
        expect(await usage, `${type} cut at ${cut}`).toBe(12);
      }
    }
  });

  it("counts a missing path 0 beside a present one; none present, invalid, or not JSON: none", async () => {
    const read = async (text: string, spec = paths) => {
      const { response, usage } = readUsage(new Response(text, { headers: json }), spec);
      await response.arrayBuffer();
      return usage;
    };
    expect(await read('{"usage":{"prompt_tokens":9}}')).toBe(9);
    expect(await read('{"usage":{"prompt_tokens":-9}}')).toBeUndefined();
    expect(await read('{"usage":{}}')).toBeUndefined();
    expect(await read('[{"usage":{"prompt_tokens":9}}]')).toBeUndefined();
    expect(await read('{"usage":{"prompt_tokens":9}')).toBeUndefined();
    expect(await read('{"n":7}', { json: ["n"] })).toBe(7);
  });

  it("passes a body past its cap through unread, and does not wrap one declared past it", async () => {
    const big = JSON.stringify({ pad: "p".repeat(5000), n: 3 });
    const streamed = readUsage(
      responseOf([big.slice(0, 100), big.slice(100)], { headers: json }),
      {
        json: "n",
      },
      { maxJsonBytes: 4096 },
    );
    expect(await streamed.response.text()).toBe(big);
    expect(await streamed.usage).toBeUndefined();
    const declared = new Response(big, {
      headers: { ...json, "Content-Length": String(big.length) },
    });
    const reading = readUsage(declared, { json: "n" }, { maxJsonBytes: 4096 });
    expect(reading.response).toBe(declared);
    expect(await reading.usage).toBeUndefined();
    // Under the default cap (1 MiB), the same body is read (once the client has taken it).
    const under = readUsage(new Response(big, { headers: json }), { json: "n" });
    await under.response.arrayBuffer();
    expect(await under.usage).toBe(3);
  });

  it("has no usage, at once, for another content type or no body", async () => {
    const text = new Response('{"n":1}', { headers: { "Content-Type": "text/plain" } });
    expect(readUsage(text, { json: "n" }).response).toBe(text);
    expect(await readUsage(text, { json: "n" }).usage).toBeUndefined();
    expect(
      await readUsage(new Response(null, { status: 204, headers: json }), { json: "n" }).usage,
    ).toBeUndefined();
  });
});
