/**
 * IP addresses as keys: parsed (IPv4, IPv6, IPv4 seen through a dual-stack socket) and grouped by
 * prefix, so one client's addresses share a key (IPv6 per /64 by default). Pure text in, text out:
 * the rules read the address from a header, network blocks and /check group the one they are
 * given, and all of them must group alike.
 */

/** How addresses are grouped: the prefix length kept of each family. */
export interface AddressGrouping {
  ipv4PrefixLength: number;
  ipv6PrefixLength: number;
}

/** "a.b.c.d" or an IPv6 address → its group key; undefined for anything unparseable. */
export function groupAddress(address: string, config: AddressGrouping): string | undefined {
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
