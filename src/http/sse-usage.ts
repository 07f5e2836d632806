/**
 * Usage read from a `text/event-stream` as its bytes pass, in constant memory. The scanner
 * follows the WHATWG event-stream parsing rules: a leading BOM is dropped, lines end with CRLF,
 * LF or CR (a CRLF split across two chunks is one line end), a line starting with ":" is a
 * comment, the `data` fields of an event are joined with LF (one space after the colon dropped),
 * other fields (`event`, `id`, `retry`) are ignored, and an empty line dispatches the event.
 *
 * Each chunk is decoded once (a streaming TextDecoder: a character split across chunks comes out
 * whole) and its lines are found with the string's native search, which costs far less per byte
 * than a search over bytes in JavaScript. Only `data` values are kept, and only until their event
 * ends; an event is parsed as JSON only when its data is an object that may hold a path (it
 * contains a path's last key, or a \u escape), so most of an LLM's events are never parsed.
 *
 * Memory: what is kept between chunks (the unfinished event's data and line) is copied into
 * strings of its own at the end of each chunk, so no chunk outlives its turn, and is capped: an
 * event whose data grows past the cap is dropped and the rest of it skipped, not buffered. Only
 * what the chunk added is copied, appended to what earlier chunks left: an event or a line that
 * comes a few bytes a chunk costs its length once, not once per chunk.
 */
import { compilePathNeedles, type UsagePath, UsageTally } from "./usage-paths";

/** The event size (characters of its joined data) past which an event is skipped: 64 Ki. */
export const DEFAULT_MAX_EVENT_LENGTH = 64 * 1024;

const LF = 10;
const CR = 13;
const COLON = 58;
const SPACE = 32;

const encoder = new TextEncoder();
const copier = new TextDecoder();
/** The same text in a string of its own (not a slice that would keep a whole chunk alive). */
const copied = (text: string) => (text === "" ? "" : copier.decode(encoder.encode(text)));

export class SseUsageScanner {
  private readonly decoder = new TextDecoder();
  private readonly tally: UsageTally;
  private readonly needles: readonly string[] | undefined;
  /**
   * The current event's data lines, joined with LF: what earlier chunks left (strings of their
   * own), then what this chunk added (slices of it, copied when the chunk is over).
   */
  private dataKept = "";
  private dataFresh = "";
  private dataLines = 0;
  /** The event's data may hold a path: worth parsing. */
  private mayHold = false;
  /** The event's data went past the cap: the rest of the event is skipped. */
  private oversized = false;
  /**
   * The start of a line the chunks so far did not finish, kept while it may be a data line: what
   * earlier chunks left, then what this chunk added (copied when the chunk is over).
   */
  private partialKept = "";
  private partialFresh = "";
  /** The unfinished line is not a data line (or is too long): the rest of it is ignored. */
  private skipping = false;
  /** The last character was a CR: an LF right after it ends no second line. */
  private afterCR = false;
  private peak = 0;

  constructor(
    paths: readonly UsagePath[],
    private readonly maxEventLength = DEFAULT_MAX_EVENT_LENGTH,
  ) {
    this.tally = new UsageTally(paths);
    this.needles = compilePathNeedles(paths);
  }

  /** Characters held between chunks (the event's data, an unfinished line): at most cap + 6. */
  get heldLength(): number {
    return this.dataLength + this.partialKept.length + this.partialFresh.length;
  }

  private get dataLength(): number {
    return this.dataKept.length + this.dataFresh.length;
  }

  /** The most characters held between chunks since the stream began. */
  get peakHeldLength(): number {
    return this.peak;
  }

  /** Scans one chunk of the body. */
  push(chunk: Uint8Array): void {
    this.scan(this.decoder.decode(chunk, { stream: true }));
    // Appended, not flattened: the kept part is never copied again.
    if (this.dataFresh !== "") this.dataKept += copied(this.dataFresh);
    if (this.partialFresh !== "") this.partialKept += copied(this.partialFresh);
    this.dataFresh = "";
    this.partialFresh = "";
    if (this.heldLength > this.peak) this.peak = this.heldLength;
  }

  /**
   * The usage read: the sum over the paths of the last valid value each event carried. With
   * `complete` (the body ended normally), a last line and event the origin did not terminate
   * are read as if it had; a body cut short (cancelled, failed) counts only events it finished.
   */
  finish(complete: boolean): number | undefined {
    if (complete) {
      this.scan(this.decoder.decode());
      const partial = this.partialKept + this.partialFresh;
      if (partial !== "") this.line(partial, 0, partial.length);
      this.dispatch();
    }
    this.clearData();
    this.partialKept = "";
    this.partialFresh = "";
    return this.tally.total();
  }

  private scan(text: string): void {
    const n = text.length;
    let i = 0;
    // The next LF and CR at or after i, each searched once per chunk rather than once per line.
    let nextLF = -2;
    let nextCR = -2;
    while (i < n) {
      if (this.afterCR) {
        this.afterCR = false;
        if (text.charCodeAt(i) === LF) {
          i++;
          continue;
        }
      }
      if (nextLF !== -1 && nextLF < i) nextLF = text.indexOf("\n", i);
      if (nextCR !== -1 && nextCR < i) nextCR = text.indexOf("\r", i);
      const end = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : Math.min(nextLF, nextCR);
      if (end === -1) {
        this.unfinished(text, i, n);
        return;
      }
      if (this.skipping) this.skipping = false;
      else if (this.partialKept !== "") {
        const whole = this.partialKept + text.slice(i, end);
        this.partialKept = "";
        this.line(whole, 0, whole.length);
      } else this.line(text, i, end);
      this.afterCR = text.charCodeAt(end) === CR;
      i = end + 1;
    }
  }

  /** Keeps the start of a line the chunk did not finish, if it may be a data line. */
  private unfinished(text: string, start: number, end: number): void {
    if (this.skipping) return;
    const kept = this.partialKept;
    // Only the line's first 5 characters say whether it is a data line (a kept one is).
    const head = kept.length >= 5 ? "data:" : kept + text.slice(start, start + 5 - kept.length);
    const data = head.length < 5 ? "data:".startsWith(head) : head.startsWith("data:");
    const length = kept.length + end - start;
    // "data: " and the value: at most the cap plus the 6 characters of the field's name.
    if (data && !this.oversized && this.dataLength + length <= this.maxEventLength + 6) {
      this.partialFresh = text.slice(start, end);
      return;
    }
    if (data && !this.oversized) this.drop();
    this.partialKept = "";
    this.skipping = true;
  }

  /** One whole line, text[start, end). */
  private line(text: string, start: number, end: number): void {
    if (start === end) {
      this.dispatch();
      return;
    }
    if (!text.startsWith("data", start)) return; // a comment, another field
    let from = start + 4;
    if (from < end) {
      if (text.charCodeAt(from) !== COLON) return; // a field named data-something
      from++;
      if (text.charCodeAt(from) === SPACE) from++;
    }
    if (this.oversized) return;
    const value = from < end ? text.slice(from, end) : "";
    // The LF that joins it to the event's data before it, if any: an event of exactly the cap fits.
    const joined = this.dataLength + value.length + (this.dataLines > 0 ? 1 : 0);
    if (joined > this.maxEventLength) {
      this.drop();
      return;
    }
    this.dataFresh = this.dataLines++ === 0 ? value : `${this.dataFresh}\n${value}`;
    if (!this.mayHold) this.mayHold = this.holds(value);
  }

  /** A key of a path or a \u escape in this data line (a key never spans two lines). */
  private holds(value: string): boolean {
    if (this.needles === undefined) return true;
    for (const needle of this.needles) if (value.includes(needle)) return true;
    return value.includes("\\u");
  }

  private drop(): void {
    this.oversized = true;
    this.clearData();
  }

  private clearData(): void {
    this.dataKept = "";
    this.dataFresh = "";
  }

  private dispatch(): void {
    if (this.dataLines > 0 && this.mayHold && !this.oversized) {
      const data = this.dataKept + this.dataFresh;
      if (data.trimStart().startsWith("{")) {
        try {
          this.tally.record(JSON.parse(data));
        } catch {
          // Not JSON (a truncated or foreign event): it carries no usage.
        }
      }
    }
    this.clearData();
    this.dataLines = 0;
    this.mayHold = false;
    this.oversized = false;
  }
}
