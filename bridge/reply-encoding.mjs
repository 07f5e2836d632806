// @ts-check
// Redis replies as the REST protocol's JSON values.
//
// With `Upstash-Encoding: base64` (the @upstash/redis default) every string at every depth,
// status strings such as OK included, is base64 of its raw bytes: the client's decoder base64-
// decodes every string inside arrays, so a plain one there would come out as garbage. (At the top
// level it passes "OK" through untouched and decodes anything else, so "T0s=" is fine too.)
// Integers stay numbers and nil stays null. Without the header, strings are UTF-8 text.

import { RedisReplyError } from "./resp-connection.mjs";

/** @typedef {import("./resp-connection.mjs").Reply} Reply */
/** @typedef {string | number | null | JsonReplyArray} JsonReply */
/** @typedef {JsonReply[]} JsonReplyArray */

/**
 * @param {Reply} reply
 * @param {boolean} base64
 * @returns {JsonReply}
 */
export function encodeReply(reply, base64) {
  if (reply === null || typeof reply === "number") return reply;
  if (Buffer.isBuffer(reply)) return reply.toString(base64 ? "base64" : "utf8");
  if (Array.isArray(reply)) return reply.map((item) => encodeReply(item, base64));
  // An error nested in an array (a Lua script returning one inside a table): the protocol has no
  // slot for it, so it travels as its text, encoded like any string so the client can decode it.
  if (reply instanceof RedisReplyError) return encodeReply(Buffer.from(reply.message), base64);
  return null;
}
