/**
 * The client's address as a rate-limit key: which header to trust for it (Cloudflare's, or the
 * proxy you run) and how addresses are grouped (IPv4 by prefix, IPv6 by /64). Also what /check
 * applies to an "ip" key it is given.
 */
import type { ClientIpConfig } from "../config/client-ip-config";

/** The grouped client address, or undefined when there is none to trust. */
export function clientIp(headers: Headers, config: ClientIpConfig): string | undefined {
  const raw = trustedAddress(headers, config);
  if (raw === undefined) return undefined;
  return groupAddress(raw, config);
}

/** The client's address as the trusted header gives it, ungrouped (what network blocks match). */
export function trustedAddress(headers: Headers, config: ClientIpConfig): string | undefined {
  const header = config.trustedProxyHeader;
  if (header) {
    const value = headers.get(header);
    if (value !== null) {
      if (header !== "x-forwarded-for") return value.trim();
      // Each proxy appends the address it saw: the entry `hops` from the right was written by
      // the outermost proxy you run; anything left of it is the client's to forge.
      const entries = value.split(",").map((entry) => entry.trim());
      return entries[entries.length - config.trustedProxyHops];
    }
    // No header: the request did not come through the proxy; fall back to the connecting IP.
  }
  return headers.get("cf-connecting-ip")?.trim() || undefined;
}

/**
 * Why clientIp found no address, in words a 400 can carry: which header was absent, short of
 * entries or not an address. Follows trustedAddress step by step; only called on that refusal.
 */
export function missingIpReason(headers: Headers, config: ClientIpConfig): string {
  const header = config.trustedProxyHeader;
  if (header) {
    const value = headers.get(header);
    if (value !== null) {
      if (header !== "x-forwarded-for")
        return `${header} (the trusted proxy header) is not an IP address`;
      const hops = config.trustedProxyHops;
      return value.split(",").length < hops
        ? `${header} has fewer than ${hops} entries`
        : `${header} entry ${hops} from the right is not an IP address`;
    }
    if (!headers.get("cf-connecting-ip")?.trim()) {
      return `neither ${header} (the trusted proxy header) nor CF-Connecting-IP is present`;
    }
  } else if (!headers.get("cf-connecting-ip")?.trim()) {
    return "no CF-Connecting-IP header";
  }
  return "CF-Connecting-IP is not an IP address";
}

/** "a.b.c.d" or an IPv6 address → its group key; undefined for anything unparseable. */
export function groupAddress(
  address: string,
  config: Pick<ClientIpConfig, "ipv4PrefixLength" | "ipv6PrefixLength">,
): string | undefined {
  const v4 = parseIpv4(address);
  if (v4) return ipv4Key(v4, config.ipv4PrefixLength);
  const v6 = parseIpv6(address);
  if (!v6) return undefined;
  // ::ffff:a.b.c.d is an IPv4 client seen through a dual-stack socket.
  if (v6.slice(0, 5).every((word) => word === 0) && v6[5] === 0xffff) {
    const [hi = 0, lo = 0] = [v6[6], v6[7]];
    return ipv4Key([hi >> 8, hi & 255, lo >> 8, lo & 255], config.ipv4PrefixLength);
  }
  return ipv6Key(v6, config.ipv6PrefixLength);
}

function ipv4Key(octets: number[], prefix: number): string {
  if (prefix >= 32) return octets.join(".");
  const value = octets.reduce((acc, octet) => acc * 256 + octet, 0);
  const masked = Math.floor(value / 2 ** (32 - prefix)) * 2 ** (32 - prefix);
  const bytes = [24, 16, 8, 0].map((shift) => Math.floor(masked / 2 ** shift) % 256);
  return `${bytes.join(".")}/${prefix}`;
}

function ipv6Key(words: number[], prefix: number): string {
  const masked = words.map((word, i) => {
    const bits = Math.min(16, Math.max(0, prefix - i * 16));
    return bits === 16 ? word : bits === 0 ? 0 : word & (0xffff << (16 - bits)) & 0xffff;
  });
  return `${compressIpv6(masked)}${prefix >= 128 ? "" : `/${prefix}`}`;
}

function parseIpv4(text: string): number[] | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const octets: number[] = [];
  for (const part of parts) {
    // No leading zeros: "010" is octal to some parsers, decimal to others.
    if (!/^(0|[1-9]\d{0,2})$/.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    octets.push(octet);
  }
  return octets;
}

/** Eight 16-bit words, or undefined. Accepts "::" compression, an IPv4 tail and a %zone. */
function parseIpv6(text: string): number[] | undefined {
  let address = text.trim();
  if (address.startsWith("[") && address.endsWith("]")) address = address.slice(1, -1);
  address = address.replace(/%.*$/, "");
  if (!/^[0-9A-Fa-f:.]{2,45}$/.test(address)) return undefined;
  if (address.includes(".")) {
    // An IPv4 tail ("::ffff:192.0.2.1") is the last two words spelled in decimal.
    const lastColon = address.lastIndexOf(":");
    const v4 = parseIpv4(address.slice(lastColon + 1));
    if (!v4) return undefined;
    const high = (((v4[0] ?? 0) << 8) | (v4[1] ?? 0)).toString(16);
    const low = (((v4[2] ?? 0) << 8) | (v4[3] ?? 0)).toString(16);
    address = `${address.slice(0, lastColon + 1)}${high}:${low}`;
  }
  const halves = address.split("::");
  if (halves.length > 2) return undefined;
  const words = (half: string | undefined): number[] | undefined => {
    if (!half) return [];
    const out: number[] = [];
    for (const group of half.split(":")) {
      if (!/^[0-9A-Fa-f]{1,4}$/.test(group)) return undefined;
      out.push(Number.parseInt(group, 16));
    }
    return out;
  };
  const head = words(halves[0]);
  const rest = words(halves[1]);
  if (!head || !rest) return undefined;
  const explicit = head.length + rest.length;
  if (halves.length === 1) return explicit === 8 ? head : undefined;
  if (explicit > 7) return undefined;
  return [...head, ...new Array<number>(8 - explicit).fill(0), ...rest];
}

/** RFC 5952 text: lower case, longest run (≥ 2) of zero words as "::". */
function compressIpv6(words: number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = words.map((word) => word.toString(16));
  if (bestStart < 0) return hex.join(":");
  const left = hex.slice(0, bestStart).join(":");
  const right = hex.slice(bestStart + bestLength).join(":");
  return `${left}::${right}`;
}
