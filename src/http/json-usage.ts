/**
 * Usage read from a JSON body as its bytes pass. The bytes are copied aside as they go by (the
 * client's copy is never held back) up to a cap, and parsed once the body has ended: a JSON
 * document is only meaningful whole, and JSON.parse of a body up to the cap costs less CPU than a
 * tokenizer in JavaScript would spend on every byte. A body past the cap is given up at once
 * (its copy dropped, nothing more kept): it has no usage, and memory stays within the cap.
 */
import { type UsagePath, UsageTally } from "./usage-paths";

/** The body size past which a JSON body is not parsed: 1 MiB. */
export const DEFAULT_MAX_JSON_BYTES = 1024 * 1024;

export class JsonUsageCollector {
  private bytes = new Uint8Array(0);
  private length = 0;
  private overCap = false;
  private peakBytes = 0;

  constructor(
    private readonly paths: readonly UsagePath[],
    private readonly maxBytes = DEFAULT_MAX_JSON_BYTES,
  ) {}

  /** Bytes held now (the copy as allocated): at most the cap. */
  get bufferedBytes(): number {
    return this.bytes.length;
  }

  /** The most bytes held at once since the body began. */
  get peakBufferedBytes(): number {
    return this.peakBytes;
  }

  /** Copies one chunk aside, or gives the body up when it passes the cap. */
  push(chunk: Uint8Array): void {
    if (this.overCap) return;
    const needed = this.length + chunk.length;
    if (needed > this.maxBytes) {
      this.overCap = true;
      this.bytes = new Uint8Array(0);
      this.length = 0;
      return;
    }
    if (needed > this.bytes.length) {
      const size = Math.min(this.maxBytes, Math.max(needed, this.bytes.length * 2, 1024));
      const grown = new Uint8Array(size);
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
      if (size > this.peakBytes) this.peakBytes = size;
    }
    this.bytes.set(chunk, this.length);
    this.length = needed;
  }

  /**
   * The usage the whole body holds (the paths summed, a missing one counting 0, undefined when
   * none is there or the body is not a JSON object), read only when the body ended normally.
   */
  finish(complete: boolean): number | undefined {
    const whole = complete && !this.overCap;
    const text = whole ? new TextDecoder().decode(this.bytes.subarray(0, this.length)) : "";
    this.bytes = new Uint8Array(0);
    this.length = 0;
    if (!whole) return undefined;
    const tally = new UsageTally(this.paths);
    try {
      tally.record(JSON.parse(text));
    } catch {
      return undefined;
    }
    return tally.total();
  }
}
