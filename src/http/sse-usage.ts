/**
 * Usage read from a `text/event-stream` as its bytes pass, in constant memory. The scanner
 * follows the WHATWG event-stream parsing rules: lines end with CRLF, LF or CR (a CRLF split
 * across two chunks is one line end), a line starting with ":" is a comment, `data` fields of an
 * event are joined with LF, one space after the colon is dropped, other fields (`event`, `id`,
 * `retry`) are ignored, an empty line dispatches the event, and a leading UTF-8 BOM is skipped.
 *
 * It works on bytes: LF and CR never occur inside a multi-byte UTF-8 sequence, so lines split
 * safely before decoding, and only the values of `data` lines are copied (the 5 bytes of a
 * line's head are kept until it is known to be one). An event's data larger than the cap is
 * dropped, and the rest of that event skipped, not buffered: what the scanner holds never
 * exceeds cap + 5 bytes, whatever the stream's length.
 */
import { mayHold, type UsagePath, UsageTally } from "./usage-paths";

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const DATA = [0x64, 0x61, 0x74, 0x61]; // "data"
const BOM = [0xef, 0xbb, 0xbf];

/** The event size (of its joined data) past which an event is skipped: 64 KiB. */
export const DEFAULT_MAX_EVENT_BYTES = 64 * 1024;

const decoder = new TextDecoder();

/** What the current line is, as far as its head tells: undecided, a `data` field, or neither. */
const Line = { Head: 0, Data: 1, Skip: 2 } as const;
type Line = (typeof Line)[keyof typeof Line];

/** The LF a data line adds to its event's data. */
const LINE_END = new Uint8Array([LF]);

export class SseUsageScanner {
  private readonly tally: UsageTally;
  private data = new Uint8Array(0);
  private dataLength = 0;
  /** The event's data went past the cap: the rest of the event is skipped. */
  private oversized = false;
  /** The event has had at least one `data` line (an empty one counts). */
  private hasData = false;
  private line: Line = Line.Head;
  private readonly head = new Uint8Array(5);
  private headLength = 0;
  /** The line has had at least one byte. */
  private lineStarted = false;
  /** After "data:", one space is still to be dropped. */
  private dropSpace = false;
  /** The last byte was a CR: an LF that follows it ends no second line. */
  private afterCR = false;
  /** How many bytes of a leading BOM were matched; -1 once the stream's start has passed. */
  private bom = 0;
  private peakBytes = 0;

  constructor(
    private readonly paths: readonly UsagePath[],
    private readonly maxEventBytes = DEFAULT_MAX_EVENT_BYTES,
  ) {
    this.tally = new UsageTally(paths);
  }

  /** Bytes held now (the event's data buffer as allocated, a line's head): at most the cap + 5. */
  get bufferedBytes(): number {
    return this.data.length + this.headLength;
  }

  /** The most bytes held at once since the stream began. */
  get peakBufferedBytes(): number {
    return this.peakBytes;
  }

  /** Scans one chunk of the body. */
  push(chunk: Uint8Array): void {
    const n = chunk.length;
    let i = 0;
    while (this.bom >= 0 && i < n) {
      if (chunk[i] !== BOM[this.bom]) {
        this.bom = -1;
        break;
      }
      i++;
      if (++this.bom === BOM.length) this.bom = -1;
    }
    // The next LF and CR at or after i, found once per chunk each rather than once per line.
    let nextLF = -2;
    let nextCR = -2;
    while (i < n) {
      if (this.afterCR) {
        this.afterCR = false;
        if (chunk[i] === LF) {
          i++;
          continue;
        }
      }
      if (nextLF !== -1 && nextLF < i) nextLF = chunk.indexOf(LF, i);
      if (nextCR !== -1 && nextCR < i) nextCR = chunk.indexOf(CR, i);
      const end = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : Math.min(nextLF, nextCR);
      if (end === -1) {
        this.feed(chunk, i, n);
        break;
      }
      this.feed(chunk, i, end);
      this.endLine();
      this.afterCR = chunk[end] === CR;
      i = end + 1;
    }
    if (this.bufferedBytes > this.peakBytes) this.peakBytes = this.bufferedBytes;
  }

  /**
   * The usage read: the sum over the paths of the last valid value each event carried. With
   * `complete` (the body ended normally), a last line and event the origin did not terminate
   * are read as if it had; a body cut short (cancelled, failed) counts only events it finished.
   */
  finish(complete: boolean): number | undefined {
    if (complete) {
      if (this.lineStarted) this.endLine();
      this.dispatch();
    }
    this.data = new Uint8Array(0);
    this.dataLength = 0;
    return this.tally.total();
  }

  private feed(chunk: Uint8Array, start: number, end: number): void {
    if (start === end) return;
    this.lineStarted = true;
    let i = start;
    while (this.line === Line.Head && i < end) {
      const byte = chunk[i++] as number;
      const at = this.headLength;
      if (at === 0 && byte === COLON) this.line = Line.Skip;
      else if (at < 4 && byte !== DATA[at]) this.line = Line.Skip;
      else if (at === 4) {
        this.line = byte === COLON ? Line.Data : Line.Skip;
        this.dropSpace = true;
        this.hasData ||= this.line === Line.Data;
      }
      this.head[this.headLength++] = byte;
      if (this.line !== Line.Head) this.headLength = 0;
    }
    if (this.line !== Line.Data || i === end) return;
    if (this.dropSpace) {
      this.dropSpace = false;
      if (chunk[i] === SPACE) i++;
    }
    this.append(chunk, i, end);
  }

  private append(chunk: Uint8Array, start: number, end: number): void {
    if (this.oversized || start === end) return;
    const needed = this.dataLength + (end - start);
    if (needed > this.maxEventBytes) {
      this.oversized = true;
      this.data = new Uint8Array(0);
      this.dataLength = 0;
      return;
    }
    if (needed > this.data.length) {
      const grown = new Uint8Array(
        Math.min(this.maxEventBytes, Math.max(needed, this.data.length * 2, 256)),
      );
      grown.set(this.data.subarray(0, this.dataLength));
      this.data = grown;
    }
    this.data.set(chunk.subarray(start, end), this.dataLength);
    this.dataLength = needed;
  }

  private endLine(): void {
    if (!this.lineStarted) {
      this.dispatch();
      return;
    }
    // A line that ended on "data" (no colon) is a data field with an empty value.
    if (this.line === Line.Head && this.headLength === 4) {
      this.line = Line.Data;
      this.hasData = true;
    }
    if (this.line === Line.Data) this.append(LINE_END, 0, 1);
    this.line = Line.Head;
    this.headLength = 0;
    this.lineStarted = false;
    this.dropSpace = false;
  }

  private dispatch(): void {
    if (this.hasData && !this.oversized && this.dataLength > 0) {
      // The data without the LF its last line added.
      const text = decoder.decode(this.data.subarray(0, this.dataLength - 1));
      if (text.trimStart().startsWith("{") && mayHold(text, this.paths)) {
        try {
          this.tally.record(JSON.parse(text));
        } catch {
          // Not JSON (a truncated or foreign event): it carries no usage.
        }
      }
    }
    this.dataLength = 0;
    this.oversized = false;
    this.hasData = false;
  }
}
