/**
 * A JSON request body read as a decision service must read it: its content type, a size cap
 * enforced before it is buffered, the parse, and (given the fields it may hold) an object of
 * those fields whose every string is well-formed UTF-16. Refusals are the problem+json answer to
 * send (415, 413, 400 naming the field); nothing is read past the cap.
 */

import { unknownFieldDetail } from "../config/field-suggestion";
import {
  illFormedString,
  isPlainObject,
  mayHoldLoneSurrogate,
  unknownField,
} from "../config/validation";
import { problemResponse } from "./problem";

export interface JsonBodyOptions {
  /** The largest body read; a longer one is a 413 and is never buffered. */
  maxBytes: number;
  /**
   * The fields an object body may hold: anything else, a body that is not an object, or a
   * string with a lone surrogate (which cannot be keyed faithfully: a header rule's hash would
   * fold it into U+FFFD, one key for many) is a 400 naming where it is.
   * @default any JSON (the caller validates it)
   */
  fields?: readonly string[];
}

/** The body read: its JSON value and its text (which says whether a string may be ill-formed). */
export type JsonBody =
  | { ok: true; json: unknown; text: string }
  | { ok: false; response: Response };

/**
 * A request's JSON body, read once within `maxBytes`: a wrong content type, a body too large,
 * JSON that does not parse or (with `fields`) a field not taken is the problem+json to answer.
 *
 * @example
 * ```ts
 * const read = await readJsonBody(request, { maxBytes: 16_384, fields: ["rule", "key"] });
 * if (!read.ok) return read.response;
 * const check = await rules.parseCheck(read.json, read.text);
 * ```
 */
export async function readJsonBody(request: Request, options: JsonBodyOptions): Promise<JsonBody> {
  const refuse = (response: Response) => ({ ok: false as const, response });
  const contentType = request.headers.get("Content-Type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    return refuse(
      problemResponse(415, {
        title: "Unsupported Media Type",
        detail: "send Content-Type: application/json",
      }),
    );
  }
  // A declared length within the cap is enforced by the runtime (a body longer than its
  // Content-Length is an error): read it in one native call, the common case, here rather than
  // through readCapped's own promise. Before touching `request.body`, which builds a stream
  // object in workerd that this path never needs.
  const length = request.headers.get("Content-Length");
  const declared = Number(length ?? "0");
  const text =
    length !== null && Number.isSafeInteger(declared) && declared <= options.maxBytes
      ? await request.text()
      : await readCapped(request, declared, options.maxBytes);
  if (text === "too-large") {
    return refuse(
      problemResponse(413, {
        title: "Payload Too Large",
        detail: `a body here is at most ${options.maxBytes} bytes`,
      }),
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return refuse(bad("body", "is not valid JSON"));
  }
  const { fields } = options;
  if (fields) {
    if (!isPlainObject(json)) return refuse(bad("body", "must be a JSON object"));
    const illFormed = mayHoldLoneSurrogate(text) ? illFormedString(json, "body") : undefined;
    if (illFormed) return refuse(bad(illFormed.field, illFormed.detail));
    const extra = unknownField(json, fields);
    if (extra) return refuse(bad(extra, unknownFieldDetail(extra, fields)));
  }
  return { ok: true, json, text };
}

function bad(field: string, detail: string): Response {
  return problemResponse(400, { title: "Bad Request", detail: `${field} ${detail}`, field });
}

/**
 * Reads at most `max` bytes, so a huge body is never buffered: a body declared too large, or one
 * without a usable Content-Length (`declared` is its value, 0 when absent).
 */
async function readCapped(
  incoming: Request,
  declared: number,
  max: number,
): Promise<string | "too-large"> {
  if (declared > max) return "too-large";
  if (!incoming.body) return "";
  const reader = incoming.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      return "too-large";
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}
