import { describe, expect, it } from 'vitest';
import { checkTarget, privateAddressReason } from '../../src/security/targets.ts';

// Every one of these must be refused when private targets are not allowed.
const HOSTILE = [
  'http://example.com/hook', // plain http
  'https://127.0.0.1/',
  'https://127.1/',
  'https://2130706433/', // decimal 127.0.0.1
  'https://0x7f000001/', // hex
  'https://0177.0.0.1/', // octal
  'https://0x7f.0.0.1/',
  'https://localhost/',
  'https://LOCALHOST./',
  'https://api.localhost/',
  'https://kubernetes.default.svc/', // Kubernetes service names
  'https://kubernetes.default.svc.cluster.local/',
  'https://api.prod.svc/',
  'https://example.com:0/', // port 0
  'https://0.0.0.0/',
  'https://0/',
  'https://10.0.0.1/',
  'https://10.255.255.255/',
  'https://172.16.0.1/',
  'https://172.31.255.255/',
  'https://192.168.1.1/',
  'https://100.64.0.1/', // CGNAT
  'https://100.127.255.254/',
  'https://169.254.169.254/latest/meta-data/', // cloud metadata
  'https://169.254.0.1/',
  'https://192.0.0.1/',
  'https://198.18.0.1/',
  'https://224.0.0.1/',
  'https://239.255.255.250/',
  'https://240.0.0.1/',
  'https://255.255.255.255/',
  'https://[::1]/',
  'https://[::]/',
  'https://[0:0:0:0:0:0:0:1]/',
  'https://[::ffff:127.0.0.1]/', // v4-mapped
  'https://[::ffff:7f00:1]/',
  'https://[::ffff:10.0.0.1]/',
  'https://[::ffff:169.254.169.254]/',
  'https://[::127.0.0.1]/', // v4-compatible
  'https://[64:ff9b::a00:1]/', // NAT64 of 10.0.0.1
  'https://[::ffff:0:a9fe:a9fe]/', // SIIT of 169.254.169.254
  'https://[2002:a9fe:a9fe::]/', // 6to4 of 169.254.169.254
  'https://[2002:7f00:1::1]/', // 6to4 of 127.0.0.1
  'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', // Teredo
  'https://[100::1]/', // discard-only
  'https://[fc00::1]/',
  'https://[fd12:3456:789a::1]/',
  'https://[fe80::1]/',
  'https://[febf::1]/',
  'https://[fec0::1]/',
  'https://[ff02::1]/',
  'https://metadata.google.internal/',
  'https://metadata/',
  'https://intranet/',
  'https://printer.local/',
  'https://db.corp/',
  'https://router.lan/',
  'https://nas.home.arpa/',
  'https://user:pass@example.com/',
  'ftp://example.com/',
  'file:///etc/passwd',
  'gopher://example.com/',
  'javascript:alert(1)',
  'not a url',
  '/relative/path',
];

const PUBLIC = [
  'https://[2002:5db8:d70e::1]/', // 6to4 of a public address

  'https://example.com/hooks/sluice',
  'https://93.184.215.14/x',
  'https://[2606:4700::6810:84e5]/',
  'https://api.example.co.uk:8443/a?b=c',
];

describe('checkTarget', () => {
  it.each(HOSTILE)('refuses %s', (url) => {
    expect(checkTarget(url, false).ok).toBe(false);
  });

  it.each(PUBLIC)('allows %s', (url) => {
    expect(checkTarget(url, false).ok).toBe(true);
  });

  it('allows loopback and http when private targets are allowed (local development)', () => {
    expect(checkTarget('http://127.0.0.1:8788/echo', true).ok).toBe(true);
    expect(checkTarget('ftp://127.0.0.1/', true).ok).toBe(false);
  });

  it('says why', () => {
    expect(checkTarget('https://169.254.169.254/', false)).toEqual({
      ok: false,
      reason: 'points to link-local / cloud metadata, which is refused (SLUICE_ALLOW_PRIVATE_TARGETS is off)',
    });
  });
});

describe('resolved addresses (as a resolver prints them)', () => {
  it('reads a dotted IPv4 tail in IPv6: public stays public, private is refused', () => {
    expect(privateAddressReason('::ffff:8.8.8.8')).toBeNull();
    expect(privateAddressReason('::ffff:10.0.0.1')).toMatch(/non-public IPv4/);
    expect(privateAddressReason('64:ff9b::192.168.0.1')).toMatch(/non-public IPv4/);
    expect(privateAddressReason('2606:4700::6810:84e5')).toBeNull();
    expect(privateAddressReason('93.184.216.34')).toBeNull();
    expect(privateAddressReason('169.254.169.254')).toMatch(/link-local|metadata/);
  });
});
