/**
 * The fields of a calendar quota (docs/calendar-quotas.md), as a LIMITER_CONFIG rule, a
 * middleware rule and an ad-hoc /check take them: one definition each, one wording.
 */
import * as v from "valibot";
import {
  canonicalTimezone,
  PERIOD_UNITS,
  type PeriodUnit,
  parseAnchor,
  timezoneIssue,
} from "../limiter/calendar-period";

/** "day", "week" or "month". */
export const periodSchema = v.picklist(
  PERIOD_UNITS as PeriodUnit[],
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
