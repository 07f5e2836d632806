// @ts-check
// A minimal RESP2 client: one socket, commands answered in order.
//
// Why not ioredis: it rewrites replies by command name (HGETALL becomes an object, the REST
// protocol needs the flat array), tracks SELECT/SUBSCRIBE state, and by default queues or
// re-sends commands while disconnected, which makes HTTP requests hang or run twice. The bridge
// needs the opposite: raw bytes out, and an immediate error when Redis is not there.

import net from "node:net";
import tls from "node:tls";

/**
 * A reply as Redis sent it. Bulk and status strings are raw bytes (the REST layer decides how to
 * encode them); integers are numbers; nil is null; an error reply is a RedisReplyError value,
 * not an exception, because inside a pipeline or EXEC it is one answer among others.
 * @typedef {Buffer | number | null | RedisReplyError | ReplyArray} Reply
 * @typedef {Reply[]} ReplyArray
 */

/** An error reply from Redis; `message` is Redis's text verbatim (clients look for NOSCRIPT). */
export class RedisReplyError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "RedisReplyError";
  }
}

/** The connection failed or is gone: the command may not have run, and no answer will come. */
export class RedisUnavailableError extends Error {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "RedisUnavailableError";
  }
}

/**
 * @typedef {object} RedisTarget
 * @property {string} host
 * @property {number} port
 * @property {boolean} tls
 * @property {string | undefined} username
 * @property {string | undefined} password
 * @property {number} db
 */

/**
 * Parses `redis://[[user]:password@]host[:port][/db]` (or `rediss://` for TLS).
 * @param {string} url
 * @returns {RedisTarget}
 */
export function parseRedisUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`invalid Redis URL ${JSON.stringify(url)}: expected redis://host:port`);
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new Error(
      `invalid Redis URL ${redactUrl(url)}: the scheme must be redis:// or rediss://`,
    );
  }
  const dbText = parsed.pathname.replace(/^\//, "");
  const db = dbText === "" ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0) {
    throw new Error(`invalid Redis URL ${redactUrl(url)}: the path must be a database number`);
  }
  return {
    // URL keeps IPv6 hosts bracketed; net.connect wants them bare.
    host: parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "127.0.0.1",
    port: parsed.port === "" ? 6379 : Number(parsed.port),
    tls: parsed.protocol === "rediss:",
    username: parsed.username === "" ? undefined : decodeURIComponent(parsed.username),
    password: parsed.password === "" ? undefined : decodeURIComponent(parsed.password),
    db,
  };
}

/** The URL with any password replaced, for messages and logs. @param {string} url */
export function redactUrl(url) {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}

/**
 * Serialises commands as RESP arrays of bulk strings, all into one buffer (one socket write per
 * HTTP pipeline).
 * @param {readonly (readonly string[])[]} commands
 */
function encodeCommands(commands) {
  /** @type {Buffer[]} */
  const parts = [];
  for (const args of commands) {
    parts.push(Buffer.from(`*${args.length}\r\n`, "latin1"));
    for (const arg of args) {
      const bytes = Buffer.from(arg, "utf8");
      parts.push(Buffer.from(`$${bytes.length}\r\n`, "latin1"), bytes, CRLF);
    }
  }
  return Buffer.concat(parts);
}

const CRLF = Buffer.from("\r\n", "latin1");

/**
 * Incremental RESP2 reader. It keeps the arrays under construction on a stack, so each element
 * is parsed once however the bytes are split into chunks (a 10 MB ZRANGE arrives in ~150 chunks;
 * re-parsing from the start of the reply each time was quadratic). An element whose bytes are
 * not all there yet is left unconsumed; `#need` says how many bytes it takes at least, so a large
 * bulk string is concatenated once, not once per chunk.
 */
export class RespReader {
  /** @type {Buffer[]} */
  #chunks = [];
  #total = 0;
  #need = 0;
  /** @type {{ items: Reply[], filled: number }[]} arrays being filled, innermost last */
  #stack = [];

  /**
   * @param {Buffer} chunk
   * @param {(reply: Reply) => void} onReply
   */
  feed(chunk, onReply) {
    this.#chunks.push(chunk);
    this.#total += chunk.length;
    if (this.#total < this.#need) return;
    const buf = this.#chunks.length === 1 ? chunk : Buffer.concat(this.#chunks, this.#total);
    let pos = 0;
    this.#need = 0;
    while (pos < buf.length) {
      const eol = buf.indexOf(CRLF, pos + 1);
      if (eol < 0) {
        this.#need = buf.length - pos + 1;
        break;
      }
      const type = buf[pos];
      /** @type {Reply} */
      let value;
      let next = eol + 2;
      if (type === 0x24) {
        // '$' bulk string
        const length = Number(buf.toString("latin1", pos + 1, eol));
        if (length < 0) {
          value = null;
        } else {
          next = eol + 2 + length + 2;
          if (buf.length < next) {
            this.#need = next - pos;
            break;
          }
          value = buf.subarray(eol + 2, next - 2);
        }
      } else if (type === 0x2a) {
        // '*' array: later elements fill it
        const count = Number(buf.toString("latin1", pos + 1, eol));
        if (count > 0) {
          this.#stack.push({ items: new Array(count), filled: 0 });
          pos = next;
          continue;
        }
        value = count < 0 ? null : [];
      } else if (type === 0x3a) {
        // ':' integer
        value = Number(buf.toString("latin1", pos + 1, eol));
      } else if (type === 0x2b) {
        // '+' status
        value = buf.subarray(pos + 1, eol);
      } else if (type === 0x2d) {
        // '-' error
        value = new RedisReplyError(buf.toString("utf8", pos + 1, eol));
      } else {
        throw new Error(`RESP protocol error: unexpected byte 0x${(type ?? 0).toString(16)}`);
      }
      pos = next;
      // Place the value; every array it completes becomes a value for its parent in turn.
      for (;;) {
        const top = this.#stack[this.#stack.length - 1];
        if (!top) {
          onReply(value);
          break;
        }
        top.items[top.filled++] = value;
        if (top.filled < top.items.length) break;
        this.#stack.pop();
        value = top.items;
      }
    }
    const rest = buf.subarray(pos);
    this.#chunks = rest.length > 0 ? [rest] : [];
    this.#total = rest.length;
  }
}

/**
 * @typedef {object} Pending
 * @property {(reply: Reply) => void} resolve
 * @property {(error: Error) => void} reject
 * @property {number} sentAt
 */

/**
 * @typedef {object} OpenOptions
 * @property {string} url
 * @property {number} [connectTimeoutMs]
 * @property {number} [commandTimeoutMs] a reply that takes longer means Redis is stuck or gone:
 *   the connection is dropped (every later reply on it is stuck behind that one anyway).
 */

export class RespConnection {
  /** @type {net.Socket} */
  #socket;
  /** @type {Pending[]} FIFO of commands awaiting replies; `#head` avoids O(n) shift(). */
  #pending = [];
  #head = 0;
  /** @type {Error | null} */
  #closedBy = null;
  #reader = new RespReader();
  /** @type {NodeJS.Timeout | undefined} */
  #watchdog;
  #commandTimeoutMs;
  #redactedUrl;
  /** @type {((error: Error) => void)[]} */
  #closeListeners = [];

  /**
   * Connects, authenticates and selects the database; rejects with RedisUnavailableError (also
   * when AUTH or SELECT is refused) and leaves nothing open on failure.
   * @param {OpenOptions} options
   */
  static async open({ url, connectTimeoutMs = 3000, commandTimeoutMs = 15000 }) {
    const target = parseRedisUrl(url);
    const socket = await connectSocket(target, connectTimeoutMs, redactUrl(url));
    const connection = new RespConnection(socket, commandTimeoutMs, redactUrl(url));
    try {
      /** @type {string[][]} */
      const handshake = [];
      if (target.password !== undefined) {
        handshake.push(
          target.username === undefined
            ? ["AUTH", target.password]
            : ["AUTH", target.username, target.password],
        );
      }
      if (target.db !== 0) handshake.push(["SELECT", String(target.db)]);
      // PING proves the server speaks RESP and that we may run commands (NOAUTH otherwise).
      handshake.push(["PING"]);
      for (const reply of await Promise.all(connection.sendBatch(handshake))) {
        if (reply instanceof RedisReplyError) {
          // NOAUTH / WRONGPASS / a bad db number: as useless as no Redis at all, and the fix is
          // the same (REDIS_URL), so it is reported the same way.
          throw new RedisUnavailableError(
            `Redis at ${redactUrl(url)} refused the connection setup (${reply.message})`,
            reply,
          );
        }
      }
    } catch (error) {
      connection.close();
      throw error;
    }
    return connection;
  }

  /**
   * @param {net.Socket} socket
   * @param {number} commandTimeoutMs
   * @param {string} redactedUrl
   */
  constructor(socket, commandTimeoutMs, redactedUrl) {
    this.#socket = socket;
    this.#commandTimeoutMs = commandTimeoutMs;
    this.#redactedUrl = redactedUrl;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 10_000);
    socket.on("data", (chunk) => {
      try {
        this.#reader.feed(chunk, (reply) => this.#settle(reply));
      } catch (error) {
        this.#fail(/** @type {Error} */ (error));
      }
    });
    socket.on("error", (error) => this.#fail(error));
    socket.on("close", () => this.#fail(new Error("connection closed")));
  }

  get closed() {
    return this.#closedBy !== null;
  }

  /** Called once, when the connection is lost or closed. @param {(error: Error) => void} fn */
  onClose(fn) {
    this.#closeListeners.push(fn);
  }

  /**
   * Writes all commands at once; one promise per command, in order. A promise rejects only with
   * RedisUnavailableError; error replies resolve as RedisReplyError values.
   * @param {readonly (readonly string[])[]} commands
   * @returns {Promise<Reply>[]}
   */
  sendBatch(commands) {
    if (this.#closedBy) {
      const error = this.#closedBy;
      return commands.map(() => Promise.reject(error));
    }
    const sentAt = Date.now();
    const promises = commands.map(
      (_) =>
        /** @type {Promise<Reply>} */ (
          new Promise((resolve, reject) => this.#pending.push({ resolve, reject, sentAt }))
        ),
    );
    this.#socket.write(encodeCommands(commands));
    this.#armWatchdog();
    return promises;
  }

  /** @param {readonly string[]} args */
  send(args) {
    return /** @type {Promise<Reply>} */ (this.sendBatch([args])[0]);
  }

  close() {
    this.#fail(new Error("connection closed by the bridge"));
  }

  /** @param {Reply} reply */
  #settle(reply) {
    const pending = this.#pending[this.#head];
    if (!pending) {
      this.#fail(new Error("RESP protocol error: a reply nobody asked for"));
      return;
    }
    this.#pending[this.#head] = /** @type {any} */ (undefined);
    this.#head++;
    if (this.#head === this.#pending.length) {
      this.#pending = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#pending.length) {
      this.#pending = this.#pending.slice(this.#head);
      this.#head = 0;
    }
    pending.resolve(reply);
  }

  // One timer checks the oldest outstanding command; replies come in order, so if it is late,
  // everything behind it is too.
  #armWatchdog() {
    if (this.#watchdog || this.#commandTimeoutMs <= 0) return;
    const period = Math.max(50, Math.min(1000, this.#commandTimeoutMs / 4));
    this.#watchdog = setInterval(() => {
      const oldest = this.#pending[this.#head];
      if (!oldest) {
        clearInterval(this.#watchdog);
        this.#watchdog = undefined;
      } else if (Date.now() - oldest.sentAt > this.#commandTimeoutMs) {
        this.#fail(new Error(`no reply within ${this.#commandTimeoutMs} ms`));
      }
    }, period);
    this.#watchdog.unref();
  }

  /** @param {Error} cause */
  #fail(cause) {
    if (this.#closedBy) return;
    const error = new RedisUnavailableError(
      `Redis at ${this.#redactedUrl} is unavailable (${cause.message})`,
      cause,
    );
    this.#closedBy = error;
    clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    this.#socket.destroy();
    const pending = this.#pending.slice(this.#head);
    this.#pending = [];
    this.#head = 0;
    for (const p of pending) p.reject(error);
    for (const fn of this.#closeListeners) fn(error);
  }
}

/**
 * @param {RedisTarget} target
 * @param {number} timeoutMs
 * @param {string} redactedUrl
 * @returns {Promise<net.Socket>}
 */
function connectSocket(target, timeoutMs, redactedUrl) {
  return new Promise((resolve, reject) => {
    const socket = target.tls
      ? tls.connect({ host: target.host, port: target.port, servername: target.host })
      : net.connect({ host: target.host, port: target.port });
    const readyEvent = target.tls ? "secureConnect" : "connect";
    /** @param {Error} cause */
    const fail = (cause) => {
      clearTimeout(timer);
      socket.destroy();
      reject(
        new RedisUnavailableError(`cannot reach Redis at ${redactedUrl} (${cause.message})`, cause),
      );
    };
    const timer = setTimeout(
      () => fail(new Error(`no connection within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.once("error", fail);
    socket.once(readyEvent, () => {
      clearTimeout(timer);
      socket.off("error", fail);
      resolve(socket);
    });
  });
}
