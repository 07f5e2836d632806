/**
 * src/http/usage-reader.ts in workerd: the response handed on carries the origin's status,
 * headers and bytes, chunk for chunk, its first chunk before the origin has sent a second; the
 * usage resolves from a header at once, from a JSON body or an event stream when the body ends,
 * and with what was already read when the client cancels or the origin fails.
 */
import { describe, expect, it } from "vitest";
import { readUsage } from "../../../src/http/usage-reader";

const bytes = (text: string) => new TextEncoder().encode(text);

/** An origin's body that the test feeds by hand, and records how it was cancelled. */
function handFed() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const cancelled: unknown[] = [];
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel: (reason) => void cancelled.push(reason),
  });
  return {
    body,
    cancelled,
    send: (text: string | Uint8Array) =>
      controller.enqueue(typeof text === "string" ? bytes(text) : text),
    end: () => controller.close(),
    fail: (error: Error) => controller.error(error),
  };
}

/** A response whose body yields exactly these chunks. */
function responseOf(chunks: (string | Uint8Array)[], init: ResponseInit): Response {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks)
        controller.enqueue(typeof chunk === "string" ? bytes(chunk) : chunk);
      controller.close();
    },
  });
  return new Response(body, init);
}

/** Every chunk the response's body yields, in order. */
async function chunksOf(response: Response): Promise<Uint8Array[]> {
  const chunks: Uint8Array[] = [];
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  for (let read = await reader.read(); !read.done; read = await reader.read())
    chunks.push(read.value);
  return chunks;
}

const sse = { "Content-Type": "text/event-stream; charset=utf-8" };
const json = { "Content-Type": "application/json" };

describe("readUsage: the response handed on", () => {
  it("passes status, headers and every byte through, chunk for chunk, whatever the bytes", async () => {
    const random = crypto.getRandomValues(new Uint8Array(3000));
    const chunks = [
      random.subarray(0, 1),
      random.subarray(1, 1000),
      bytes("\r\n\n"),
      random.subarray(1000),
    ];
    for (const [type, spec] of [
      [sse, { json: "usage.total_tokens" }],
      [json, { json: ["a", "b"] }],
      [{ "Content-Type": "application/octet-stream" }, { json: "a" }],
      [{}, { header: "x-usage" }],
    ] as const) {
      const origin = responseOf(chunks, {
        status: 207,
        statusText: "Multi",
        headers: { ...type, "X-Origin": "kept" },
      });
      const { response, usage } = readUsage(origin, spec);
      expect(response.status).toBe(207);
      expect(response.statusText).toBe("Multi");
      expect(response.headers.get("X-Origin")).toBe("kept");
      expect(await chunksOf(response)).toEqual(chunks);
      expect(await usage).toBeUndefined();
    }
  });

  it("forwards the first chunk while the origin has sent nothing more", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), {
      json: "usage.total_tokens",
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.send('data: {"choices":[]}\n\n');
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: {"choices":[]}\n\n');
    origin.send('data: {"usage":{"total_tokens":31}}\n\n');
    origin.end();
    expect((await reader.read()).done).toBe(false);
    expect((await reader.read()).done).toBe(true);
    expect(await usage).toBe(31);
  });

  it("passes a 10 MB event stream without usage through whole: no usage, every byte", async () => {
    const event = bytes(`data: {"choices":[{"delta":{"content":"${"t".repeat(100)}"}}]}\n\n`);
    // The event over and over, cut every 65 000 bytes (inside events), as a fast origin sends.
    const period = new Uint8Array(event.length * 1000);
    for (let at = 0; at < period.length; at += event.length) period.set(event, at);
    const twice = new Uint8Array(period.length * 2);
    twice.set(period);
    twice.set(period, period.length);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 10 * 1024 * 1024) return controller.close();
        controller.enqueue(twice.subarray(sent % period.length, (sent % period.length) + 65_000));
        sent += 65_000;
      },
    });
    const { response, usage } = readUsage(new Response(body, { headers: sse }), {
      json: "usage.total_tokens",
    });
    let received = 0;
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      received += read.value.length;
    }
    expect(received).toBe(sent);
    expect(await usage).toBeUndefined();
  });
});

describe("readUsage: a header", () => {
  it("resolves at once from a header that holds an integer, the response returned as is", async () => {
    const origin = new Response("body", { headers: { "X-Usage": " 42 " } });
    const { response, usage } = readUsage(origin, { header: "x-usage" });
    expect(response).toBe(origin);
    expect(await usage).toBe(42);
    expect(await response.text()).toBe("body");
  });

  it("has no usage for a missing or invalid value", async () => {
    for (const value of [
      undefined,
      "-1",
      "1.5",
      "abc",
      "1e3",
      "+4",
      "1000000000001",
      "",
      "12 13",
    ]) {
      const headers: Record<string, string> = value === undefined ? {} : { "X-Usage": value };
      const { usage } = readUsage(new Response("b", { headers }), { header: "X-Usage" });
      expect(await usage, String(value)).toBeUndefined();
    }
    const { usage } = readUsage(new Response("b", { headers: { "X-Usage": "1000000000000" } }), {
      header: "X-Usage",
    });
    expect(await usage).toBe(1e12);
  });

  it("reads a trailer, where the runtime exposes them, once the body has ended", async () => {
    const origin = handFed();
    const withTrailers = Object.assign(new Response(origin.body), {
      trailers: Promise.resolve(new Headers({ "X-Usage": "17" })),
    });
    const { response, usage } = readUsage(withTrailers, { header: "x-usage" });
    let resolved = false;
    void usage.then(() => (resolved = true));
    origin.send("part");
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(resolved).toBe(false);
    origin.end();
    expect((await reader.read()).done).toBe(true);
    expect(await usage).toBe(17);
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

describe("readUsage: an event stream cut short", () => {
  const start = 'data: {"type":"message_start","message":{"usage":{"input_tokens":25}}}\n\n';
  const paths = { json: ["message.usage.input_tokens", "usage.output_tokens"] };

  it("resolves with the usage already read when the client cancels, and cancels the origin", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.send(start);
    await reader.read();
    // The next event is cut before its end: not counted.
    origin.send('data: {"usage":{"output_tokens":9}}\n');
    await reader.read();
    await reader.cancel("client gone");
    expect(await usage).toBe(25);
    expect(origin.cancelled).toEqual(["client gone"]);
  });

  it("resolves with no usage when the client leaves before any was reported", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths);
    await (response.body as ReadableStream<Uint8Array>).cancel();
    expect(await usage).toBeUndefined();
    expect(origin.cancelled).toHaveLength(1);
  });

  it("resolves with the usage already read when the origin fails, the failure handed on", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.send(start);
    await reader.read();
    origin.fail(new Error("origin broke off"));
    await expect(reader.read()).rejects.toThrow("origin broke off");
    expect(await usage).toBe(25);
  });
});

describe("readUsage: a spec", () => {
  it("refuses an empty path, an empty segment, no paths or an empty header name", () => {
    const response = new Response("{}", { headers: json });
    for (const spec of [{ json: "" }, { json: "a..b" }, { json: [] }, { json: ["a", ".b"] }]) {
      expect(() => readUsage(response, spec), JSON.stringify(spec)).toThrow(TypeError);
    }
    expect(() => readUsage(response, { header: " " })).toThrow(TypeError);
  });
});
