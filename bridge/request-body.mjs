// @ts-check
// Turns a REST request body into Redis commands (arrays of strings).
//
// Each argument goes to Redis as the string its JSON token spells. JSON.parse would turn the
// token 12345678901234567890 into 12345678901234567000 and 1.50 into 1.5, so number tokens are
// read from the raw text: numbers are rare in bodies, and the scan only runs when one occurs.

/** The body is not a valid request; answered with 400. */
export class BadRequestError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "BadRequestError";
  }
}

/**
 * `/` takes one command: `["cmd", arg, …]`.
 * @param {string} text
 * @returns {string[]}
 */
export function parseCommand(text) {
  const body = parseJson(text);
  const numbers = new NumberTokens(text);
  return toCommand(body, numbers, "the body");
}

/**
 * `/pipeline` and `/multi-exec` take a list of commands: `[["cmd", …], …]`.
 * @param {string} text
 * @returns {string[][]}
 */
export function parseCommandList(text) {
  const body = parseJson(text);
  if (!Array.isArray(body)) {
    throw new BadRequestError(
      'ERR the body must be a JSON array of commands: [["SET","k","v"], …]',
    );
  }
  if (body.length === 0) throw new BadRequestError("ERR the body holds no commands");
  const numbers = new NumberTokens(text);
  return body.map((command, i) => toCommand(command, numbers, `command ${i + 1}`));
}

/** @param {string} text @returns {unknown} */
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new BadRequestError(
      `ERR the body is not valid JSON (${/** @type {Error} */ (error).message})`,
    );
  }
}

/**
 * @param {unknown} value
 * @param {NumberTokens} numbers
 * @param {string} where
 * @returns {string[]}
 */
function toCommand(value, numbers, where) {
  if (!Array.isArray(value) || value.length === 0) {
    throw new BadRequestError(`ERR ${where} must be a non-empty JSON array: ["CMD", arg, …]`);
  }
  if (typeof value[0] !== "string" || value[0] === "") {
    throw new BadRequestError(`ERR ${where} must start with the command name as a string`);
  }
  return value.map((arg, i) => {
    switch (typeof arg) {
      case "string":
        return arg;
      case "number":
        return numbers.next();
      case "boolean":
        return arg ? "true" : "false";
      default:
        throw new BadRequestError(
          `ERR argument ${i + 1} of ${where} is ${arg === null ? "null" : Array.isArray(arg) ? "an array" : "an object"}; arguments must be strings, numbers or booleans`,
        );
    }
  });
}

/**
 * The spelling of each number token in the text, in document order. Valid bodies hold only
 * arrays, so document order is the order toCommand meets the numbers in.
 */
class NumberTokens {
  #text;
  /** @type {string[] | null} */
  #tokens = null;
  #index = 0;

  /** @param {string} text */
  constructor(text) {
    this.#text = text;
  }

  next() {
    this.#tokens ??= scanNumberTokens(this.#text);
    const token = this.#tokens[this.#index++];
    // Cannot happen for text JSON.parse accepted; guard so a scanner bug is loud, not silent.
    if (token === undefined) throw new Error("number token scan out of step with JSON.parse");
    return token;
  }
}

/** @param {string} text */
function scanNumberTokens(text) {
  /** @type {string[]} */
  const tokens = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip a string: find the closing quote that is not escaped.
      let q = i;
      for (;;) {
        q = text.indexOf('"', q + 1);
        if (q < 0) return tokens;
        let backslashes = 0;
        while (text.charCodeAt(q - 1 - backslashes) === 0x5c) backslashes++;
        if (backslashes % 2 === 0) break;
      }
      i = q + 1;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      while (j < n && isNumberChar(text.charCodeAt(j))) j++;
      tokens.push(text.slice(i, j));
      i = j;
    } else {
      i++;
    }
  }
  return tokens;
}

/** @param {number} c */
function isNumberChar(c) {
  return (
    (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d
  );
}
