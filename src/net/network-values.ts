/**
 * How network blocks spell their values (docs/plans.md "What the admin routes accept"): an
 * address or CIDR, a country, an AS number, each refused with a reason or normalized to the one
 * form the store holds and a copy matches (network-blocks.ts).
 */

import { countryCode } from "./country-codes";
import { groupAddress } from "./ip-address";

/**
 * An address or CIDR as blocks store it (the form `find` looks up), or why it is refused:
 * "192.0.2.7", "192.0.2.0/24" (host bits cleared, so "192.0.2.77/24" is that /24), "2001:db8::/32"
 * (RFC 5952 text: lower case, zeros compressed). An IPv4-mapped IPv6 address is the IPv4 one
 * (requests are matched so), its prefix length less 96. Refused: anything with whitespace,
 * brackets or a zone id ("fe80::1%eth0": a zone names an interface of the sender's, not an
 * address a request comes from), leading zeros in an IPv4 part ("010": octal to some parsers), a
 * length past the family's, and /0: every address of a family is an outage, not a block.
 */
export function parseNetwork(
  text: string,
): { ok: true; value: string } | { ok: false; detail: string } {
  const refuse = (detail: string) => ({ ok: false as const, detail });
  if (!/^[0-9A-Fa-f:./]{1,50}$/.test(text)) {
    return refuse(
      "must be an IPv4 or IPv6 address or CIDR (digits, hex, '.', ':' and one '/': no spaces, brackets or zone)",
    );
  }
  const slash = text.indexOf("/");
  const address = slash < 0 ? text : text.slice(0, slash);
  const full = groupAddress(address, { ipv4PrefixLength: 32, ipv6PrefixLength: 128 });
  if (full === undefined) return refuse("must be an IPv4 or IPv6 address or CIDR");
  const isV6 = full.includes(":");
  if (slash < 0) return { ok: true, value: full };
  const lengthText = text.slice(slash + 1);
  if (!/^(0|[1-9]\d{0,2})$/.test(lengthText)) {
    return refuse("has a prefix length (after '/') that is not a number without leading zeros");
  }
  // An IPv4-mapped address written in IPv6 ("::ffff:192.0.2.1/120") keeps its IPv6 length.
  const mapped = !isV6 && address.includes(":");
  const given = Number(lengthText);
  const length = mapped ? given - 96 : given;
  const most = isV6 ? 128 : 32;
  if (length < 0 || length > most) {
    return refuse(
      mapped
        ? "is IPv4-mapped: its prefix length must be from 97 to 128 (an IPv4 /1 to /32)"
        : `has a prefix length past ${most}`,
    );
  }
  if (length === 0) return refuse("is /0, every address: refused (remove the route instead)");
  const value = groupAddress(
    address,
    isV6
      ? { ipv4PrefixLength: 32, ipv6PrefixLength: length }
      : { ipv4PrefixLength: length, ipv6PrefixLength: 128 },
  );
  return value === undefined
    ? refuse("must be an IPv4 or IPv6 address or CIDR")
    : { ok: true, value };
}

/** An address or CIDR as blocks store it, or undefined (parseNetwork says why). */
export function normalizeNetwork(text: string): string | undefined {
  const parsed = parseNetwork(text);
  return parsed.ok ? parsed.value : undefined;
}

/**
 * A country code as blocks store it ("de" → "DE"), or undefined: ISO 3166-1 alpha-2, or
 * Cloudflare's XX (unknown) and T1 (Tor), case folded (country-codes.ts).
 */
export function normalizeCountry(text: string): string | undefined {
  return countryCode(text);
}

/**
 * An AS number as blocks store it ("AS13335", "as13335", "13335" and 13335 → "13335"), or
 * undefined: 1 to 4 294 967 295, no leading zeros, no space after "AS". AS 0 is refused: it is
 * reserved (RFC 7607), no network announces it.
 */
export function normalizeAsn(value: unknown): string | undefined {
  const digits =
    typeof value === "string" ? /^(?:AS)?([1-9]\d{0,9})$/i.exec(value)?.[1] : undefined;
  const asn = digits !== undefined ? Number(digits) : value;
  return typeof asn === "number" && Number.isSafeInteger(asn) && asn >= 1 && asn <= 4_294_967_295
    ? String(asn)
    : undefined;
}

/** A network block's value as stored (normalized), or why it is refused (docs/plans.md). */
export function networkValue(
  kind: "ip" | "country" | "asn",
  given: unknown,
): { ok: true; value: string } | { ok: false; detail: string } {
  if (kind === "ip") {
    return typeof given === "string"
      ? parseNetwork(given)
      : { ok: false, detail: "must be an IPv4 or IPv6 address or CIDR (a string)" };
  }
  const value =
    kind === "country"
      ? typeof given === "string"
        ? normalizeCountry(given)
        : undefined
      : normalizeAsn(given);
  if (value !== undefined) return { ok: true, value };
  return {
    ok: false,
    detail:
      kind === "country"
        ? "must be an ISO 3166-1 alpha-2 code (GB, not UK or GBR), XX (unknown) or T1 (Tor)"
        : 'must be an AS number from 1 to 4294967295 (13335 or "AS13335")',
  };
}
