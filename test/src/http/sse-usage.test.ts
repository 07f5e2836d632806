/**
 * src/http/sse-usage.ts: the event-stream scanner on its own, fed chunks as a body would be.
 * Usage is the same wherever the chunks split (every byte offset of a small stream, and one byte
 * a chunk), under each line ending; and what it holds stays within its cap over 10 MB.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_EVENT_LENGTH, SseUsageScanner } from "../../../src/http/sse-usage";
import { compilePaths } from "../../../src/http/usage-paths";

const bytes = (text: string) => new TextEncoder().encode(text);

/** The usage of `stream` for `paths`, its bytes fed in the pieces that `cuts` (offsets) make. */
function scan(
  stream: Uint8Array,
  paths: string | string[],
  cuts: number[] = [],
  maxEventLength = DEFAULT_MAX_EVENT_LENGTH,
): number | undefined {
  const scanner = new SseUsageScanner(compilePaths(paths), maxEventLength);
  let from = 0;
  for (const cut of [...cuts, stream.length]) {
    scanner.push(stream.subarray(from, cut));
    from = cut;
  }
  return scanner.finish(true);
}

/** An Anthropic Messages stream (its documented event sequence), with a ping and a comment. */
const anthropic = [
  ": a comment line\n",
  "event: message_start\n",
  'data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",',
  '"content":[],"model":"claude-é€𝄞","usage":{"input_tokens":25,"output_tokens":1}}}\n\n',
  "event: content_block_start\n",
  'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
  'event: ping\ndata: {"type": "ping"}\n\n',
  "event: content_block_delta\n",
  'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hé"}}\n\n',
  'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
  "event: message_delta\n",
  'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}\n\n',
  'event: message_stop\ndata: {"type":"message_stop"}\n\n',
].join("");
const anthropicPaths = ["message.usage.input_tokens", "usage.output_tokens"];

/** An OpenAI chat completion stream with include_usage: `"usage": null` until the last chunk. */
const openai = [
  'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant"}}],"usage":null}\n\n',
  'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}\n\n',
  'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}\n\n',
  "data: [DONE]\n\n",
].join("");

describe("SseUsageScanner", () => {
  it("reads OpenAI's total from its last chunk, the null usage before it not counting", () => {
    expect(scan(bytes(openai), "usage.total_tokens")).toBe(12);
    expect(scan(bytes(openai), ["usage.prompt_tokens", "usage.completion_tokens"])).toBe(12);
  });

  it("sums Anthropic's input (message_start) and output (last message_delta) tokens", () => {
    expect(scan(bytes(anthropic), anthropicPaths)).toBe(40);
  });

  it("reads the same usage wherever the chunks split, under LF, CRLF and CR line ends", () => {
    // The last message_delta's data over two lines, so that a line end read twice would show.
    const twoLines = anthropic.replace('"end_turn"},', '"end_turn"},\ndata:');
    for (const end of ["\n", "\r\n", "\r"]) {
      const stream = bytes(`\uFEFF${twoLines.replaceAll("\n", end)}`);
      expect(scan(stream, anthropicPaths)).toBe(40);
      for (let cut = 1; cut < stream.length; cut++) {
        expect(scan(stream, anthropicPaths, [cut]), `${JSON.stringify(end)} cut at ${cut}`).toBe(
          40,
        );
      }
      const everyByte = Array.from({ length: stream.length - 1 }, (_, i) => i + 1);
      expect(scan(stream, anthropicPaths, everyByte)).toBe(40);
    }
    const stream = bytes(openai.replaceAll("\n", "\r\n"));
    for (let cut = 1; cut < stream.length; cut++) {
      expect(scan(stream, "usage.total_tokens", [cut])).toBe(12);
    }
  });

  it("joins an event's data lines with LF, drops one space after the colon, reads data with none", () => {
    expect(
      scan(bytes('data: {"usage":\ndata:{"total_tokens":\ndata:  7}}\n\n'), "usage.total_tokens"),
    ).toBe(7);
    // A line "data" alone is a data field with an empty value: the event's data gains an LF.
    expect(scan(bytes('data: {"n":\ndata\ndata: 4}\n\n'), "n")).toBe(4);
    // Fields named like data but not it are ignored.
    expect(scan(bytes('datum: {"n":1}\n\ndata2: {"n":2}\n\n'), "n")).toBeUndefined();
  });

  it("lets the last event that carries each path win; invalid values carry nothing", () => {
    const events = (...data: string[]) => bytes(data.map((d) => `data: ${d}\n\n`).join(""));
    expect(scan(events('{"n":5}', '{"n":9}', '{"other":1}'), "n")).toBe(9);
    for (const invalid of ["-1", "1.5", '"12"', "1e13", "null", "true", "[3]"]) {
      expect(scan(events('{"n":5}', `{"n":${invalid}}`), "n"), invalid).toBe(5);
      expect(scan(events(`{"n":${invalid}}`), "n"), invalid).toBeUndefined();
    }
    expect(scan(events('{"n":1000000000000}'), "n")).toBe(1e12);
    // One path present, the other never: the missing one counts 0. Neither: no usage.
    expect(scan(events('{"a":{"b":3}}'), ["a.b", "c"])).toBe(3);
    expect(scan(events('{"a":3}', "[DONE]", "not json {"), ["a.b", "c"])).toBeUndefined();
    // Only own properties, only objects, on the way down a path.
    expect(
      scan(events('{"a":[{"b":3}]}', '{"x":1}'), ["a.0.b", "toString.length"]),
    ).toBeUndefined();
  });

  it("finds a key spelt with a \\u escape", () => {
    expect(scan(bytes('data: {"usage":{"total\\u005ftokens":5}}\n\n'), "usage.total_tokens")).toBe(
      5,
    );
  });

  it("reads a last event the origin did not terminate only when the body ended normally", () => {
    const paths = compilePaths("n");
    const whole = new SseUsageScanner(paths);
    whole.push(bytes('data: {"n":1}\n\ndata: {"n":2}'));
    expect(whole.finish(true)).toBe(2);
    const cut = new SseUsageScanner(paths);
    cut.push(bytes('data: {"n":1}\n\ndata: {"n":2}\n'));
    expect(cut.finish(false)).toBe(1);
  });

  it("skips an event past its cap, whole, and reads the next ones", () => {
    const big = `data: {"n":3,"pad":"${"x".repeat(200)}"}\n\n`;
    const split = `data: {"n":4,\ndata: "pad":"${"y".repeat(60)}",\ndata: "more":"${"z".repeat(60)}"}\n\n`;
    const stream = bytes(`data: {"n":1}\n\n${big}${split}`);
    const everyByte = Array.from({ length: stream.length - 1 }, (_, i) => i + 1);
    for (const cuts of [[], everyByte]) {
      expect(scan(stream, "n", cuts, 100)).toBe(1);
      expect(scan(stream, "n", cuts, 1000)).toBe(4);
    }
    expect(scan(bytes(`${big}data: {"n":2}\n\n`), "n", [], 100)).toBe(2);
  });

  it("holds at most its cap over a 10 MB stream without usage, an oversized event in it", () => {
    const event = bytes(`data: {"choices":[{"delta":{"content":"${"t".repeat(150)}"}}]}\n\n`);
    // The stream is the event over and over, cut every 16 000 bytes: most cuts fall inside one.
    const period = new Uint8Array(event.length * 200);
    for (let at = 0; at < period.length; at += event.length) period.set(event, at);
    const twice = new Uint8Array(period.length * 2);
    twice.set(period);
    twice.set(period, period.length);
    const pieces = function* () {
      for (let at = 0; at < 10 * 1024 * 1024; at += 16_000) {
        yield twice.subarray(at % period.length, (at % period.length) + 16_000);
      }
    };
    const cap = DEFAULT_MAX_EVENT_LENGTH + 6;
    const scanner = new SseUsageScanner(compilePaths("usage.total_tokens"));
    scanner.push(bytes(`data: {"usage":{"total_tokens":3},"pad":"${"h".repeat(200 * 1024)}"}\n\n`));
    expect(scanner.heldLength).toBeLessThanOrEqual(cap);
    for (const piece of pieces()) {
      scanner.push(piece);
      expect(scanner.heldLength).toBeLessThanOrEqual(cap);
    }
    expect(scanner.peakHeldLength).toBeLessThanOrEqual(cap);
    expect(scanner.finish(true)).toBeUndefined();
    // Without the oversized event, what is held is one unfinished event, not the megabytes; the
    // scanner is still in step after 10 MB of cuts: a last event's usage is read.
    const small = new SseUsageScanner(compilePaths("usage.total_tokens"));
    for (const piece of pieces()) small.push(piece);
    small.push(bytes('\n\ndata: {"usage":{"total_tokens":42}}\n\n'));
    expect(small.peakHeldLength).toBeGreaterThan(0);
    expect(small.peakHeldLength).toBeLessThanOrEqual(event.length);
    expect(small.finish(true)).toBe(42);
  });
});
