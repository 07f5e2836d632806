import { describe, expect, it } from "vitest";
import {
  type CalendarPeriod,
  offsetAt,
  parseAnchor,
  periodAt,
  periodStarts,
  timezoneIssue,
} from "../../../src/limiter/calendar-period";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const bounds = (period: CalendarPeriod, when: string) => {
  const { start, end } = periodAt(period, at(when));
  return [iso(start), iso(end)];
};
const month = (timezone = "UTC", anchor?: string): CalendarPeriod => ({
  unit: "month",
  timezone,
  ...(anchor ? { anchor: at(anchor) } : {}),
});

describe("calendar months", () => {
  it("months of 28, 29, 30 and 31 days end where the next begins, to the ms", () => {
    expect(bounds(month(), "2026-02-28T23:59:59.999Z")).toEqual([
      "2026-02-01T00:00:00.000Z",
      "2026-03-01T00:00:00.000Z",
    ]);
    expect(bounds(month(), "2028-02-29T12:00:00Z")).toEqual([
      "2028-02-01T00:00:00.000Z",
      "2028-03-01T00:00:00.000Z",
    ]);
    expect(bounds(month(), "2026-04-30T23:59:59.999Z")).toEqual([
      "2026-04-01T00:00:00.000Z",
      "2026-05-01T00:00:00.000Z",
    ]);
    expect(bounds(month(), "2026-12-31T23:59:59.999Z")).toEqual([
      "2026-12-01T00:00:00.000Z",
      "2027-01-01T00:00:00.000Z",
    ]);
    // The boundary itself is the next period's first instant.
    expect(bounds(month(), "2027-01-01T00:00:00Z")[0]).toBe("2027-01-01T00:00:00.000Z");
  });

  it("an anchor on the 31st starts on the last day of shorter months: Feb 28, Feb 29, Apr 30", () => {
    const billing = month("UTC", "2026-01-31T09:00:00Z");
    expect(periodStarts(billing, at("2026-02-15T00:00:00Z"), 1, 2).map(iso)).toEqual([
      "2025-12-31T09:00:00.000Z",
      "2026-01-31T09:00:00.000Z",
      "2026-02-28T09:00:00.000Z",
      "2026-03-31T09:00:00.000Z",
    ]);
    expect(bounds(billing, "2028-02-29T08:59:59.999Z")).toEqual([
      "2028-01-31T09:00:00.000Z",
      "2028-02-29T09:00:00.000Z",
    ]);
    expect(bounds(billing, "2026-04-30T09:00:00Z")).toEqual([
      "2026-04-30T09:00:00.000Z",
      "2026-05-31T09:00:00.000Z",
    ]);
  });

  it("a month in a timezone starts at its midnight there, whatever the offset that month", () => {
    // Berlin: +01:00 in February, +02:00 in April (the change is on March 29, 2026).
    expect(bounds(month("Europe/Berlin"), "2026-03-15T12:00:00Z")).toEqual([
      "2026-02-28T23:00:00.000Z",
      "2026-03-31T22:00:00.000Z",
    ]);
  });
});

describe("DST changes", () => {
  const day = (timezone: string, anchor?: string): CalendarPeriod => ({
    unit: "day",
    timezone,
    ...(anchor ? { anchor: at(anchor) } : {}),
  });

  it("New York: the spring-forward day lasts 23 hours, the fall-back day 25", () => {
    const [start, end] = bounds(day("America/New_York"), "2026-03-08T12:00:00Z");
    expect([start, end]).toEqual(["2026-03-08T05:00:00.000Z", "2026-03-09T04:00:00.000Z"]);
    expect(at(end as string) - at(start as string)).toBe(23 * 3_600_000);
    const [s2, e2] = bounds(day("America/New_York"), "2026-11-01T12:00:00Z");
    expect(at(e2 as string) - at(s2 as string)).toBe(25 * 3_600_000);
  });

  it("a start in the skipped hour moves forward by the gap; in the repeated hour, the earlier", () => {
    // 02:30 does not exist on March 8 in New York: 03:30 EDT.
    const skipped = day("America/New_York", "2026-01-05T02:30:00-05:00");
    expect(bounds(skipped, "2026-03-08T12:00:00Z")[0]).toBe("2026-03-08T07:30:00.000Z");
    // 01:30 happens twice on November 1: the first, in EDT.
    const repeated = day("America/New_York", "2026-01-05T01:30:00-05:00");
    expect(bounds(repeated, "2026-11-01T12:00:00Z")[0]).toBe("2026-11-01T05:30:00.000Z");
  });

  it("Berlin: a week across the change is 167 hours, and starts on the anchor's weekday and time", () => {
    const week: CalendarPeriod = {
      unit: "week",
      timezone: "Europe/Berlin",
      anchor: at("2026-01-05T09:00:00+01:00"), // a Monday, 09:00
    };
    const [start, end] = bounds(week, "2026-03-29T12:00:00Z");
    expect([start, end]).toEqual(["2026-03-23T08:00:00.000Z", "2026-03-30T07:00:00.000Z"]);
    expect(at(end as string) - at(start as string)).toBe(167 * 3_600_000);
  });

  it("a week without an anchor starts on Monday at midnight", () => {
    const week: CalendarPeriod = { unit: "week", timezone: "UTC" };
    expect(bounds(week, "2026-12-05T12:00:00Z")).toEqual([
      "2026-11-30T00:00:00.000Z",
      "2026-12-07T00:00:00.000Z",
    ]);
  });
});

describe("inputs", () => {
  it("zones: known IANA names pass, others are refused; offsets read east-positive", () => {
    expect(timezoneIssue("Europe/Berlin")).toBeUndefined();
    expect(timezoneIssue("UTC")).toBeUndefined();
    expect(timezoneIssue("Mars/Olympus_Mons")).toMatch(/IANA/);
    expect(timezoneIssue("")).toMatch(/IANA/);
    expect(offsetAt(at("2026-07-01T00:00:00Z"), "Asia/Kolkata")).toBe(330 * 60_000);
    expect(offsetAt(at("2026-07-01T00:00:00Z"), "America/New_York")).toBe(-4 * 3_600_000);
  });

  it("anchors: instants with an offset only", () => {
    expect(parseAnchor("2026-01-31T00:00:00Z")).toBe(at("2026-01-31T00:00:00Z"));
    expect(parseAnchor("2026-03-15T09:00+01:00")).toBe(at("2026-03-15T08:00:00Z"));
    for (const bad of [
      "2026-01-31",
      "2026-01-31T00:00:00",
      "yesterday",
      "2026-02-30T00:00:00Z",
      5,
    ]) {
      expect(parseAnchor(bad), String(bad)).toBeUndefined();
    }
  });
});
