/**
 * A count's birth stamp, for the algorithms that keep one count per window or period (fixed-window,
 * calendar), composed in scripts.ts after them is known to be in the script.
 *
 * A reset (peek-reset.ts) deletes a count, and a settle or refund of a request admitted before it
 * would then move the count that starts after it (which never held that request's units): a
 * give-back there lets the new window over-admit. So a reset leaves a tombstone in the count's
 * place, and the admission that finds it starts the count stamped with its birth, `:<now>:<member
 * id>` after the count (the admission's store time and member). Every later write of that count
 * keeps the stamp; a refund or a settle gives back or charges a stamped count only if it held the
 * request: born before the admission, or by the request itself. An admission in the same
 * millisecond as the one that started the count after a reset is the one case left undecided:
 * its refund and settle change nothing (its reservation stands: never an over-admission). Counts
 * never reset carry no stamp and are read as they always were (born at 0): admissions read and
 * write what they did, and a version of the code from before stamps reads a tombstone or a
 * stamped count as no count at all (as after a reset).
 */
import type { Algorithm } from "../algorithm";
import { MAX_SETTLE_AGE_MS } from "../caps";

/** The algorithms whose count a reset leaves a tombstone for, and whose counts carry the stamp. */
export const STAMPED_COUNTS: ReadonlySet<Algorithm> = new Set<Algorithm>([
  "fixed-window",
  "calendar",
]);

/**
 * How long a reset's tombstone lives: a settle or refund more than MAX_SETTLE_AGE_MS after its
 * admission changes nothing any more, and the admission came before the reset (plus a minute for
 * clocks apart). The count's next admission replaces it sooner.
 */
export const TOMBSTONE_LIFE_MS = MAX_SETTLE_AGE_MS + 60_000;

/** What a reset writes in a count's place (no count parses it: old code reads no count). */
export const RESET_TOMBSTONE = "reset";

export const COUNT_STAMP_LUA = `
local RESET_TOMBSTONE = '${RESET_TOMBSTONE}'
-- A stamp as it follows the count: ':<born>:<member id>' (the member id last: any text).
local STAMPED = '^:%-?%d+:'
-- Whether the count stamped \`born\` held the request p (its admission p.at, its member p.member).
local held_since = REFUNDS and function(born, p)
  local t, by = string.match(born, '^:(%-?%d+):(.*)$')
  t = tonumber(t)
  return t < p.at or (t == p.at and by == p.member)
end
`;
