/**
 * The fields of a calendar quota (docs/calendar-quotas.md), as a LIMITER_CONFIG rule, a
 * middleware rule and an ad-hoc /check take them: one definition each, one wording.
 */
import * as v from "valibot";
import {
  canonicalTimezone,
  type PeriodUnit,
  parseAnchor,
  timezoneIssue,
} from "../limiter/calendar-period";

/**
 * "day", "week" or "month". Spelled out (PERIOD_UNITS holds the same): a named alias here would
 * reach the published declarations as `import("..")`, which a consumer cannot resolve.
 */
export const periodSchema = v.picklist(
  ["day", "week", "month"] as const satisfies readonly PeriodUnit[],
  'must be "day", "week" or "month"',
);

const TIMEZONE = 'must be an IANA time zone name ("UTC", "Europe/Berlin", "America/New_York")';

/** An IANA zone name this runtime knows, → as it spells it. */
export const timezoneSchema = v.pipe(
  v.string(TIMEZONE),
  v.check((zone) => timezoneIssue(zone) === undefined, TIMEZONE),
  v.transform(canonicalTimezone),
);

const ANCHOR =
  'must be an ISO-8601 instant with its offset ("2026-01-31T00:00:00Z", "2026-03-15T09:00:00+01:00")';

/** An ISO-8601 instant → Unix ms. */
export const anchorSchema = v.pipe(
  v.string(ANCHOR),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const ms = parseAnchor(dataset.value);
    if (ms !== undefined) return ms;
    addIssue({ message: ANCHOR });
    return NEVER;
  }),
);

/** Why a rule refuses both `window` and `period`. */
export const PERIOD_NOT_WINDOW =
  'cannot be combined with "window": a rule counts per window or per calendar period, not both';

/** Why a period rule refuses another algorithm. */
export const PERIOD_ALGORITHM =
  'is "calendar" for a rule with "period" (a count per period, reset when the next starts): leave it out';

/** Why `timezone` or `anchor` without `period` is refused. */
export const NEEDS_PERIOD = 'applies to calendar quotas only: it needs "period"';

/**
 * Why `lease: true` is refused on a calendar quota: a lease is exact because its units are
 * stamped at its end in a log of times; a period keeps a count, and a unit stamped ahead could
 * land in the next period, spending its budget early. Regions lease too: a period rule is always
 * decided by home.
 */
export const PERIOD_NOT_LEASED =
  "does not apply to a calendar quota (period): it keeps a count per period, which a lease cannot stamp ahead; it is decided by the store (and, with regions, by home)";
