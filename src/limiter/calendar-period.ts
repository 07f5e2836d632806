/**
 * Calendar periods (a quota per day, week or month in a timezone): where the period that holds
 * an instant starts and ends. Pure arithmetic on Intl.DateTimeFormat (workerd has the full IANA
 * database), no date library: the offset of a zone at an instant is read from formatToParts.
 *
 * A period starts at the anchor's wall-clock time of day in the zone, on the anchor's weekday
 * (week) or day of month (month; a day past the month's end starts on its last day: the 31st →
 * Feb 28/29). So a day across a DST change lasts 23 or 25 hours. A start whose wall-clock time
 * does not exist (a spring-forward gap) is moved forward by the gap; one that happens twice (a
 * fall-back hour) is the earlier: Temporal's "compatible" reading, what calendars do.
 */

/** The length of a calendar period. */
export type PeriodUnit = "day" | "week" | "month";

const PERIOD_UNITS: readonly PeriodUnit[] = ["day", "week", "month"];

/** A calendar period as a rule names it: its unit, its zone, and the instant that phases it. */
export interface CalendarPeriod {
  unit: PeriodUnit;
  /** An IANA zone name ("UTC", "Europe/Berlin"), one formatWallClock accepts. */
  timezone: string;
  /**
   * Unix ms of an instant whose wall-clock weekday / day of month and time of day (in
   * `timezone`) start every period. Absent: midnight, on Monday (week) or the 1st (month).
   */
  anchor?: number | undefined;
}

/**
 * The longest a period of each unit lasts (ms): a day across a fall-back change is 25 hours; a
 * week holds at most one change, a month of 31 days too. What the limiter uses as the policy's
 * window where a length is needed (the fallback limiter, the RateLimit-Policy header).
 */
export const LONGEST_PERIOD_MS: Readonly<Record<PeriodUnit, number>> = {
  day: 25 * 3_600_000,
  week: 7 * 86_400_000 + 3_600_000,
  month: 31 * 86_400_000 + 3_600_000,
};

const DAY_MS = 86_400_000;

/** Wall-clock fields, months 1-based (as written), ms within the second. */
interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  ms: number;
}

// One formatter per zone: building one costs far more than using it. Bounded, since an ad-hoc
// /check may name any zone (there are ~600).
const FORMATTERS = new Map<string, Intl.DateTimeFormat>();
const MAX_FORMATTERS = 1_000;

function formatterOf(timezone: string): Intl.DateTimeFormat {
  let format = FORMATTERS.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
      era: "short",
    });
    if (FORMATTERS.size >= MAX_FORMATTERS) FORMATTERS.clear();
    FORMATTERS.set(timezone, format);
  }
  return format;
}

/** A zone name as the runtime spells it ("europe/berlin" → "Europe/Berlin"); a known one only. */
export function canonicalTimezone(timezone: string): string {
  return formatterOf(timezone).resolvedOptions().timeZone;
}

/** Why a zone name is not one this runtime knows, or undefined when it is. */
export function timezoneIssue(timezone: unknown): string | undefined {
  const words = 'must be an IANA time zone name ("UTC", "Europe/Berlin", "America/New_York")';
  if (typeof timezone !== "string" || timezone.length === 0 || timezone.length > 64) return words;
  try {
    formatterOf(timezone);
    return undefined;
  } catch {
    return words;
  }
}

// An instant with its offset, as ISO 8601 writes it: a zone-less time would mean another
// instant in every zone, and a date alone another one still.
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/** An anchor as written ("2026-01-31T00:00:00Z", "2026-03-15T09:00:00+01:00") → Unix ms. */
export function parseAnchor(text: unknown): number | undefined {
  if (typeof text !== "string" || !ISO_INSTANT.test(text)) return undefined;
  // Date.parse rolls "02-30" over into March: each field must be one the calendar has.
  const [year, month, day, hour, minute, second = 0] = (text.match(/\d+/g) ?? []).map(Number);
  if (
    !(month !== undefined && month >= 1 && month <= 12) ||
    !(day !== undefined && day >= 1 && day <= daysIn(year as number, month)) ||
    (hour as number) > 23 ||
    (minute as number) > 59 ||
    second > 59
  ) {
    return undefined;
  }
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

/** The wall clock in `timezone` at instant `at`. */
function wallClock(at: number, timezone: string): WallClock {
  const parts = formatterOf(timezone).formatToParts(new Date(at));
  const field = (type: string) => Number(parts.find((part) => part.type === type)?.value);
  const era = parts.find((part) => part.type === "era")?.value;
  const year = field("year");
  return {
    // Years before 1 AD are written as "2 BC": astronomical year 1 - n.
    year: era === "BC" || era === "B" ? 1 - year : year,
    month: field("month"),
    day: field("day"),
    hour: field("hour"),
    minute: field("minute"),
    second: field("second"),
    ms: ((at % 1000) + 1000) % 1000,
  };
}

/** The wall clock's fields read as if the zone were UTC (ms): calendar arithmetic's number. */
function asUtc(clock: WallClock): number {
  const date = new Date(0);
  date.setUTCFullYear(clock.year, clock.month - 1, clock.day);
  date.setUTCHours(clock.hour, clock.minute, clock.second, clock.ms);
  return date.getTime();
}

/** The zone's offset from UTC at instant `at` (ms; positive east of Greenwich). */
export function offsetAt(at: number, timezone: string): number {
  return asUtc(wallClock(at, timezone)) - at;
}

/**
 * The instant a wall-clock time (as asUtc gives it) names in the zone: the earlier of two in a
 * repeated hour, moved forward by the gap in a skipped one.
 */
function instantOf(local: number, timezone: string): number {
  // A zone changes its offset at most once in two days: the offsets a day before and after
  // are the only ones this wall-clock time can have.
  const before = offsetAt(local - DAY_MS, timezone);
  const after = offsetAt(local + DAY_MS, timezone);
  const early = local - before;
  const late = local - after;
  const earlyFits = offsetAt(early, timezone) === before;
  const lateFits = offsetAt(late, timezone) === after;
  if (earlyFits && lateFits) return Math.min(early, late);
  if (earlyFits) return early;
  if (lateFits) return late;
  // Skipped: read with the offset before the change, the time lands as far past it as it asked.
  return local - before;
}

/** What phases every period: the anchor's wall clock in the zone (midnight, Monday, the 1st). */
function anchorClock(period: CalendarPeriod): WallClock & { weekday: number } {
  if (period.anchor === undefined) {
    return { year: 1970, month: 1, day: 1, hour: 0, minute: 0, second: 0, ms: 0, weekday: 1 };
  }
  const clock = wallClock(period.anchor, period.timezone);
  return { ...clock, weekday: new Date(asUtc({ ...clock, hour: 0 })).getUTCDay() };
}

/** Days in a month (1-based), proleptic Gregorian. */
function daysIn(year: number, month: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, month, 0);
  return date.getUTCDate();
}

/**
 * The start (wall clock, as asUtc) of the period `offset` periods after the one whose calendar
 * slot holds the local date of `local`'s day: the period's day in that slot, at the anchor's time.
 */
function localStart(
  unit: PeriodUnit,
  anchor: WallClock & { weekday: number },
  local: WallClock,
  offset: number,
): number {
  const time = { hour: anchor.hour, minute: anchor.minute, second: anchor.second, ms: anchor.ms };
  if (unit === "day") {
    return asUtc({ ...local, ...time }) + offset * DAY_MS;
  }
  if (unit === "week") {
    const midnight = asUtc({ ...local, hour: 0, minute: 0, second: 0, ms: 0 });
    const back = (new Date(midnight).getUTCDay() - anchor.weekday + 7) % 7;
    return asUtc({ ...local, ...time }) - back * DAY_MS + offset * 7 * DAY_MS;
  }
  // Month: count months from year 0 so that an offset crosses years.
  const index = local.year * 12 + (local.month - 1) + offset;
  const year = Math.floor(index / 12);
  const month = index - year * 12 + 1;
  return asUtc({ year, month, day: Math.min(anchor.day, daysIn(year, month)), ...time });
}

/**
 * The starts of consecutive periods around `at`: `before` periods before the one that holds it,
 * that one, and `after` more after it (each the next one's start too). [start, end) of the period
 * that holds `at` is `[starts[before], starts[before + 1])`.
 */
export function periodStarts(period: CalendarPeriod, at: number, before = 0, after = 1): number[] {
  const anchor = anchorClock(period);
  const local = wallClock(at, period.timezone);
  const startAt = (offset: number) =>
    instantOf(localStart(period.unit, anchor, local, offset), period.timezone);
  // The slot of `at`'s local date, or the one before when its start is still ahead.
  let base = 0;
  if (startAt(0) > at) base = -1;
  const starts: number[] = [];
  for (let i = -before; i <= after; i++) starts.push(startAt(base + i));
  return starts;
}

// The last starts computed per period (unit, zone, anchor): every decision of a period rule
// needs them, and they change once a period; computing them reads the zone's offsets ~17 times.
const AROUND = new Map<string, readonly number[]>();
const MAX_AROUND = 1_000;

/**
 * periodStarts(period, at, 1, 2): the period before the one that holds `at`, that one and two
 * after, as a store call sends them; remembered per period until `at` leaves its period.
 */
export function startsAround(period: CalendarPeriod, at: number): readonly number[] {
  const name = `${period.unit}|${period.timezone}|${period.anchor ?? ""}`;
  const known = AROUND.get(name);
  if (known && (known[1] as number) <= at && at < (known[2] as number)) return known;
  const starts = periodStarts(period, at, 1, 2);
  if (AROUND.size >= MAX_AROUND) AROUND.clear();
  AROUND.set(name, starts);
  return starts;
}

/** The period that holds `at`: its start (inclusive) and end (exclusive), Unix ms. */
export function periodAt(period: CalendarPeriod, at: number): { start: number; end: number } {
  const [start, end] = periodStarts(period, at) as [number, number];
  return { start, end };
}

/** Why a period (as a library caller may pass it) is not one, or undefined when it is. */
export function periodIssue(period: unknown): string | undefined {
  if (typeof period !== "object" || period === null) return "must be { unit, timezone, anchor? }";
  const { unit, timezone, anchor } = period as Partial<Record<string, unknown>>;
  if (!PERIOD_UNITS.includes(unit as PeriodUnit)) return 'unit must be "day", "week" or "month"';
  const zone = timezoneIssue(timezone);
  if (zone) return `timezone ${zone}`;
  if (anchor !== undefined && !(typeof anchor === "number" && Number.isSafeInteger(anchor))) {
    return "anchor must be Unix ms (an integer)";
  }
  return undefined;
}
