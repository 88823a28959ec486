/**
 * Which push targets are allowed (SSRF defence, docs/DESIGN.md §8). Checked at enqueue and again
 * at push. The WHATWG URL parser already normalises decimal, octal and hex IPv4 spellings
 * (`http://0x7f.1/` has the hostname `127.0.0.1`), so the checks below see canonical forms.
 *
 * A public hostname whose DNS answer is private (rebinding) is caught at push time on Node, where
 * the resolved address is checked and pinned (src/node/pinned-transport.ts); a Worker's fetch
 * cannot pin an address (docs/operations.md, "Security notes").
 */

export type TargetCheck = { ok: true; url: URL } | { ok: false; reason: string };

export function checkTarget(raw: string, allowPrivate: boolean): TargetCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not an absolute URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return { ok: false, reason: `must be https (got ${url.protocol})` };
  }
  if (url.protocol === 'http:' && !allowPrivate) {
    return { ok: false, reason: 'must be https (http is allowed only with SLUICE_ALLOW_PRIVATE_TARGETS=true)' };
  }
  if (url.port === '0') return { ok: false, reason: 'must not use port 0' };
  if (url.username || url.password) {
    return { ok: false, reason: 'must not carry credentials; send them in `headers`' };
  }
  if (!allowPrivate) {
    const why = privateHostReason(url.hostname);
    if (why) return { ok: false, reason: `points to ${why}, which is refused (SLUICE_ALLOW_PRIVATE_TARGETS is off)` };
  }
  return { ok: true, url };
}

/** A name that resolved to an address Sluice may not push to (thrown by a pinning fetch). */
export class PrivateTargetError extends Error {
  override name = 'PrivateTargetError';
}

/** Why a resolved address (IPv4 dotted, or IPv6 without brackets) is not public, or `null`. */
export function privateAddressReason(address: string): string | null {
  return privateHostReason(address.includes(':') ? `[${address}]` : address);
}

/** Why a hostname is not a public target, or `null` when it is. */
export function privateHostReason(hostname: string): string | null {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host.startsWith('[')) return ipv6Reason(host.slice(1, -1));
  const v4 = parseIpv4(host);
  if (v4 !== null) return ipv4Reason(v4);
  if (host === 'localhost' || host.endsWith('.localhost')) return 'a loopback name';
  if (!host.includes('.')) return 'a single-label (internal) name';
  // Kubernetes service names (`name.namespace.svc`, `….svc.cluster.local`) are internal too.
  for (const suffix of ['.local', '.internal', '.intranet', '.lan', '.home.arpa', '.corp', '.svc']) {
    if (host.endsWith(suffix)) return `an internal name (*${suffix})`;
  }
  return null;
}

function parseIpv4(host: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return null;
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

const IPV4_BLOCKS: ReadonlyArray<readonly [string, number, string]> = [
  ['0.0.0.0', 8, 'the "this network" range'],
  ['10.0.0.0', 8, 'a private range (10/8)'],
  ['100.64.0.0', 10, 'the carrier-grade NAT range'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local / cloud metadata'],
  ['172.16.0.0', 12, 'a private range (172.16/12)'],
  ['192.0.0.0', 24, 'the IETF protocol range'],
  ['192.0.2.0', 24, 'a documentation range'],
  ['192.168.0.0', 16, 'a private range (192.168/16)'],
  ['198.18.0.0', 15, 'the benchmarking range'],
  ['198.51.100.0', 24, 'a documentation range'],
  ['203.0.113.0', 24, 'a documentation range'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'a reserved range'],
];

function ipv4Reason(addr: number): string | null {
  for (const [base, bits, what] of IPV4_BLOCKS) {
    const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
    if ((addr & mask) >>> 0 === (parseIpv4(base)! & mask) >>> 0) return what;
  }
  return null;
}

function ipv6Reason(text: string): string | null {
  const groups = parseIpv6(text);
  if (groups === null) return 'an unreadable IPv6 address';
  const [g0 = 0, g1 = 0, g2 = 0, , g4 = 0, g5 = 0, g6 = 0, g7 = 0] = groups;
  const zeroUpTo = (n: number) => groups.slice(0, n).every((g) => g === 0);
  if (zeroUpTo(8)) return 'the unspecified address';
  if (zeroUpTo(7) && g7 === 1) return 'loopback';
  // Forms that embed an IPv4 address: judge the IPv4 address.
  const low = ((g6 << 16) | g7) >>> 0;
  const mapped = 'an IPv6 form of a non-public IPv4 address';
  if (zeroUpTo(5) && g5 === 0xffff) return ipv4Reason(low) && mapped; // ::ffff:a.b.c.d
  if (zeroUpTo(4) && g4 === 0xffff && g5 === 0) return ipv4Reason(low) && mapped; // ::ffff:0:a.b.c.d (SIIT)
  if (zeroUpTo(6)) return ipv4Reason(low) ? mapped : 'an IPv4-compatible address'; // ::a.b.c.d
  if (g0 === 0x64 && g1 === 0xff9b) return ipv4Reason(low) && mapped; // NAT64
  if (g0 === 0x2002) return ipv4Reason(((g1 << 16) | g2) >>> 0) && mapped; // 6to4
  if (g0 === 0x2001 && g1 === 0) return 'a Teredo address (it tunnels to IPv4)';
  if (g0 === 0x0100 && g1 === 0 && g2 === 0 && groups[3] === 0) return 'the discard-only range (100::/64)';
  if ((g0 & 0xfe00) === 0xfc00) return 'a unique-local range (fc00::/7)';
  if ((g0 & 0xffc0) === 0xfe80) return 'link-local (fe80::/10)';
  if ((g0 & 0xffc0) === 0xfec0) return 'site-local (fec0::/10)';
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  if (g0 === 0x2001 && groups[1] === 0x0db8) return 'a documentation range';
  return null;
}

/** Eight 16-bit groups of an IPv6 address as the URL parser prints it, or `null`. */
function parseIpv6(text: string): number[] | null {
  const halves = text.split('::');
  if (halves.length > 2) return null;
  // The URL parser prints embedded IPv4 in hex, but resolvers answer with a dotted tail
  // (::ffff:8.8.8.8): that tail is two groups.
  const read = (part: string) =>
    part === ''
      ? []
      : part.split(':').flatMap((g) => {
          const v4 = g.includes('.') ? parseIpv4(g) : null;
          if (g.includes('.')) return v4 === null ? [Number.NaN] : [v4 >>> 16, v4 & 0xffff];
          return /^[0-9a-f]{1,4}$/i.test(g) ? [Number.parseInt(g, 16)] : [Number.NaN];
        });
  const head = read(halves[0] ?? '');
  const tail = halves.length === 2 ? read(halves[1] ?? '') : [];
  const fill = 8 - head.length - tail.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return null;
  const groups = [...head, ...new Array<number>(fill).fill(0), ...tail];
  return groups.some((g) => Number.isNaN(g) || g < 0 || g > 0xffff) ? null : groups;
}
