// What a private redis-server did and holds, read on a connection of its own: each call's Redis
// time from SLOWLOG (an EVALSHA entry is the whole script's duration; the commands a script runs
// are logged too, each with its own, shorter, time) and every key's size from
// MEMORY USAGE. For measurements only: it reconfigures the server's slow log, so never point it at
// the shared Redis.
import { RedisReplyError, RespConnection } from "../../bridge/resp-connection.mjs";

/** The probe's own connection name: its commands are left out of the calls it reports. */
const PROBE_NAME = "redis-probe";

type Reply = Awaited<ReturnType<RespConnection["send"]>>;

/** One command (or script) as SLOWLOG recorded it. */
export interface RedisCall {
  /** Redis time of the call, in microseconds. */
  micros: number;
  /** The command, lower-cased (`evalsha`, `set`, …). */
  command: string;
  /** The first key it named (a script's KEYS[1]), when it named one. */
  key: string | undefined;
  /** Unix time (s) Redis logged it at. */
  at: number;
}

/** One key's size. */
export interface KeySize {
  key: string;
  type: string;
  /** MEMORY USAGE … SAMPLES 0: every element counted. */
  bytes: number;
  /** STRLEN of a string, ZCARD of a sorted set, else 0. */
  length: number;
}

function text(reply: Reply | undefined): string {
  return Buffer.isBuffer(reply) ? reply.toString("utf8") : String(reply);
}

function items(reply: Reply | undefined): Reply[] {
  if (reply instanceof RedisReplyError) throw reply;
  return Array.isArray(reply) ? reply : [];
}

/** Redis answers BUSY once a script has run this long. */
export const BUSY_THRESHOLD_MS = 1_000;

/** A script that kept Redis busy past the probe's limit; the probe ended it. */
export class RunawayScriptError extends Error {
  constructor(
    /** How long the probe saw Redis busy (the script had run BUSY_THRESHOLD_MS before). */
    readonly busyMs: number,
    /** SCRIPT KILL ended it; otherwise it had written and the server was shut down. */
    readonly killed: boolean,
  ) {
    super(
      `a script kept Redis busy for ${busyMs} ms past busy-reply-threshold; ${killed ? "SCRIPT KILL ended it" : "it had written (UNKILLABLE): the server was shut down"}`,
    );
  }
}

export class RedisProbe {
  readonly #connection: RespConnection;
  readonly #busyLimitMs: number;

  private constructor(connection: RespConnection, busyLimitMs: number) {
    this.#connection = connection;
    this.#busyLimitMs = busyLimitMs;
  }

  /**
   * Connects to the private Redis at `url` and logs every call from now on.
   * @param busyLimitMs how long a BUSY Redis is waited for before its script is ended
   */
  static async open(url: string, { slowlogLength = 100_000, busyLimitMs = 2_000 } = {}) {
    const connection = await RespConnection.open({ url, commandTimeoutMs: 30_000 });
    const probe = new RedisProbe(connection, busyLimitMs);
    await probe.#run(["CLIENT", "SETNAME", PROBE_NAME]);
    // Every call (0 µs and up), and room for all of them between two reads.
    await probe.#run(["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    await probe.#run(["CONFIG", "SET", "slowlog-max-len", String(slowlogLength)]);
    // BUSY from 1 s of script instead of 5: a runaway is seen (and ended) sooner. A script is
    // never stopped by this: it runs on, and its slow-log entry has its whole duration.
    await probe.#run(["CONFIG", "SET", "busy-reply-threshold", String(BUSY_THRESHOLD_MS)]);
    await probe.#run(["SLOWLOG", "RESET"]);
    return probe;
  }

  async #run(args: string[]): Promise<Reply> {
    const [reply] = await this.#batch([args]);
    if (reply instanceof RedisReplyError) throw reply;
    return reply as Reply;
  }

  /**
   * The replies to `commands`, sent again while Redis answers BUSY: a script running past
   * busy-reply-threshold (BUSY_THRESHOLD_MS here) blocks every other client, the probe included, until it ends (its
   * entry is in the slow log once it has). One still running after `busyLimitMs` is ended
   * (SCRIPT KILL, or SHUTDOWN NOSAVE for one that has written: this is a private server) and
   * reported as a RunawayScriptError: nothing more can be measured.
   */
  async #batch(commands: string[][]): Promise<Reply[]> {
    let busySince: number | undefined;
    for (;;) {
      const replies = await Promise.all(this.#connection.sendBatch(commands));
      const busy = replies.some(
        (reply) => reply instanceof RedisReplyError && /\bBUSY\b/.test(reply.message),
      );
      if (!busy) return replies;
      busySince ??= Date.now();
      const waited = Date.now() - busySince;
      if (waited > this.#busyLimitMs) {
        const killed = await this.#connection.send(["SCRIPT", "KILL"]);
        if (killed instanceof RedisReplyError) {
          await this.#connection.send(["SHUTDOWN", "NOSAVE"]).catch(() => {});
        }
        throw new RunawayScriptError(waited, !(killed instanceof RedisReplyError));
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /**
   * The calls other clients made since the last read, oldest first; the log is emptied in the
   * same transaction, so a call made meanwhile is in this read or the next, never lost.
   */
  async takeCalls(): Promise<RedisCall[]> {
    const replies = await this.#batch([
      ["MULTI"],
      ["SLOWLOG", "GET", "-1"],
      ["SLOWLOG", "RESET"],
      ["EXEC"],
    ]);
    const [entries] = items(replies[3]);
    const calls: RedisCall[] = [];
    // Each entry: id, unix time, microseconds, arguments, client address, client name.
    for (const entry of items(entries)) {
      const [, at, micros, args, , name] = items(entry);
      if (text(name) === PROBE_NAME) continue;
      const argv = items(args).map(text);
      const command = (argv[0] ?? "").toLowerCase();
      const scripted = command === "evalsha" || command === "eval" || command === "evalsha_ro";
      const key = scripted ? (Number(argv[2]) > 0 ? argv[3] : undefined) : argv[1];
      calls.push({ micros: Number(micros), command, key, at: Number(at) });
    }
    return calls.reverse();
  }

  /** Every key the server holds, with its size. */
  async keySizes(): Promise<KeySize[]> {
    const keys: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = items(await this.#run(["SCAN", cursor, "COUNT", "1000"]));
      cursor = text(next);
      keys.push(...items(batch).map(text));
    } while (cursor !== "0");
    const types = (await this.#batch(keys.map((key) => ["TYPE", key]))).map(text);
    const sizes = await this.#batch(
      keys.flatMap((key, i) => [
        ["MEMORY", "USAGE", key, "SAMPLES", "0"],
        types[i] === "string" ? ["STRLEN", key] : types[i] === "zset" ? ["ZCARD", key] : ["PING"],
      ]),
    );
    return keys.map((key, i) => {
      const length = sizes[2 * i + 1];
      return {
        key,
        type: types[i] ?? "none",
        // A key gone between SCAN and MEMORY USAGE (expired) reads as null: 0 bytes.
        bytes: Number(sizes[2 * i] ?? 0),
        length: typeof length === "number" ? length : 0,
      };
    });
  }

  close(): void {
    this.#connection.close();
  }
}
