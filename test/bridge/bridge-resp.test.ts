// The bridge's RESP2 reader, fed the same bytes split at every possible point: replies must not
// depend on how TCP happens to chunk them.
import { describe, expect, it } from "vitest";
import { RedisReplyError, RespReader } from "../../bridge/resp-connection.mjs";

const wire = Buffer.concat([
  Buffer.from("+OK\r\n:-42\r\n$-1\r\n*-1\r\n*0\r\n$0\r\n\r\n"),
  Buffer.from("$7\r\na\r\nb✓\r\n"), // a bulk string holding CRLF and UTF-8
  Buffer.from("*3\r\n:1\r\n*2\r\n$1\r\nx\r\n*1\r\n-ERR nested\r\n+PONG\r\n"),
  Buffer.from("-NOSCRIPT No matching script. Please use EVAL.\r\n"),
]);

function readAll(chunks: Buffer[]) {
  const reader = new RespReader();
  const replies: unknown[] = [];
  for (const chunk of chunks) reader.feed(chunk, (reply) => replies.push(normalize(reply)));
  return replies;
}

function normalize(reply: unknown): unknown {
  if (Buffer.isBuffer(reply)) return reply.toString("utf8");
  if (Array.isArray(reply)) return reply.map(normalize);
  if (reply instanceof RedisReplyError) return { error: reply.message };
  return reply;
}

const expected = [
  "OK",
  -42,
  null,
  null,
  [],
  "",
  "a\r\nb✓",
  [1, ["x", [{ error: "ERR nested" }]], "PONG"],
  { error: "NOSCRIPT No matching script. Please use EVAL." },
];

describe("RespReader", () => {
  it("reads a stream in one chunk", () => {
    expect(readAll([wire])).toEqual(expected);
  });

  it("reads it split at any point", () => {
    for (let cut = 1; cut < wire.length; cut++) {
      expect(readAll([wire.subarray(0, cut), wire.subarray(cut)])).toEqual(expected);
    }
  });

  it("reads it one byte at a time", () => {
    const bytes = Array.from(wire, (_, i) => wire.subarray(i, i + 1));
    expect(readAll(bytes)).toEqual(expected);
  });

  it("emits nothing for a partial reply until the rest arrives", () => {
    const reader = new RespReader();
    const replies: unknown[] = [];
    reader.feed(Buffer.from("*2\r\n$3\r\nab"), (r) => replies.push(r));
    expect(replies).toEqual([]);
    reader.feed(Buffer.from("c\r\n:7\r\n"), (r) => replies.push(normalize(r)));
    expect(replies).toEqual([["abc", 7]]);
  });
});
