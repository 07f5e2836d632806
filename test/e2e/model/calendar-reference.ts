/**
 * The reference's calendar: where a period starts, written apart from the library's arithmetic
 * (src/limiter/calendar-period.ts) so that a mistake there is not a mistake here. It reads only
 * a zone's wall clock at an instant (Intl) and finds a period's start among a few candidates:
 * the anchor's wall-clock time on the nearby days that qualify, each turned into an instant by
 * trying the zone's offsets around it (the earliest that reads back as that wall clock: the first
 * of a repeated hour; none in a spring-forward gap: the offset before the gap, which moves the
 * start forward by the gap). docs/calendar-quotas.md states these rules.
 */
import type { CalendarPeriod } from "../../../src/limiter/calendar-period";

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

const formats = new Map<string, Intl.DateTimeFormat>();

/** The wall clock in `timezone` at instant `u`, as the UTC instant that reads the same. */
function wall(u: number, timezone: string): number {
  let format = formats.get(timezone);
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
    });
    formats.set(timezone, format);
  }
  const f: Record<string, number> = {};
  for (const part of format.formatToParts(new Date(u))) f[part.type] = Number(part.value);
  const at = Date.UTC(f.year as number, (f.month as number) - 1, f.day, f.hour, f.minute, f.second);
  return at + (((u % 1_000) + 1_000) % 1_000);
}

const offset = (u: number, timezone: string) => wall(u, timezone) - u;

/** The instant whose wall clock in `timezone` reads `local` ("compatible", as the docs say). */
function instantOf(local: number, timezone: string): number {
  const offsets = new Set([-DAY_MS, 0, DAY_MS].map((d) => offset(local + d, timezone)));
  const exact = [...offsets].map((o) => local - o).filter((u) => wall(u, timezone) === local);
  if (exact.length > 0) return Math.min(...exact);
  return local - offset(local - DAY_MS, timezone);
}

/** The period starts around instant `t`, sorted. */
function startsAround(period: CalendarPeriod, t: number): number[] {
  const tz = period.timezone;
  const anchor = period.anchor === undefined ? undefined : new Date(wall(period.anchor, tz));
  const timeOfDay = anchor
    ? anchor.getTime() -
      Date.UTC(anchor.getUTCFullYear(), anchor.getUTCMonth(), anchor.getUTCDate())
    : 0;
  const here = new Date(wall(t, tz));
  const [y, m, d] = [here.getUTCFullYear(), here.getUTCMonth(), here.getUTCDate()];
  const locals: number[] = [];
  if (period.unit === "day") {
    for (let i = -2; i <= 2; i++) locals.push(Date.UTC(y, m, d + i) + timeOfDay);
  } else if (period.unit === "week") {
    const weekday = anchor ? anchor.getUTCDay() : 1;
    for (let i = -9; i <= 9; i++) {
      const day = Date.UTC(y, m, d + i);
      if (new Date(day).getUTCDay() === weekday) locals.push(day + timeOfDay);
    }
  } else {
    const dom = anchor ? anchor.getUTCDate() : 1;
    for (let i = -2; i <= 2; i++) {
      const last = new Date(Date.UTC(y, m + i + 1, 0)).getUTCDate();
      locals.push(Date.UTC(y, m + i, Math.min(dom, last)) + timeOfDay);
    }
  }
  return locals.map((local) => instantOf(local, tz)).sort((a, b) => a - b);
}

/** The start of the period that holds `t`, and the next one's. */
export function periodOf(period: CalendarPeriod, t: number): { start: number; next: number } {
  const starts = startsAround(period, t);
  const start = starts.filter((s) => s <= t).at(-1);
  const next = starts.find((s) => s > t);
  if (start === undefined || next === undefined) throw new Error(`no period around ${t}`);
  return { start, next };
}

/** The start of the `n`th period after the one holding `t`. */
export function nthStartAfter(period: CalendarPeriod, t: number, n: number): number {
  let at = t;
  for (let i = 0; i < n; i++) at = periodOf(period, at).next;
  return at;
}

/** The next instant after `t` (within a year) at which the zone's offset changes. */
export function nextOffsetChange(timezone: string, t: number): number | undefined {
  const before = offset(t, timezone);
  let hi = t;
  while (offset(hi, timezone) === before) {
    hi += DAY_MS;
    if (hi - t > 400 * DAY_MS) return undefined;
  }
  let lo = hi - DAY_MS;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (offset(mid, timezone) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}
