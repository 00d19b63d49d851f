// verify-full's check of the server's certificate against the host connected to.
import { isIP } from 'node:net';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';

/** An IPv6 address in one spelling (0:0:0:0:0:0:0:1 and ::1 alike). */
const canonicalIPv6 = (ip: string): string => new URL(`http://[${ip}]/`).hostname.slice(1, -1);

/**
 * verify-full's check of the server's identity: node's own, but for an IPv6 literal, which is
 * matched against the certificate's IP addresses here. Node.js 24.17 and newer (and 22.23.1)
 * run the host through domainToASCII first, which turns '::1' into '', so an IPv6 host never
 * matched an IP SAN (nodejs/node#64144) and verify-full to [::1] failed. A zone id (fe80::1%eth0)
 * names an interface, which no certificate holds: refused, as libpq refuses it.
 */
export function serverIdentity(host: string, cert: PeerCertificate): Error | undefined {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (!bare.includes(':')) return checkServerIdentity(bare, cert);
  const ips = (cert.subjectaltname ?? '')
    .split(', ')
    .filter((name) => name.startsWith('IP Address:'))
    .map((name) => name.slice('IP Address:'.length))
    .filter((ip) => isIP(ip) !== 0)
    .map((ip) => (isIP(ip) === 6 ? canonicalIPv6(ip) : ip));
  if (isIP(bare) === 6 && !bare.includes('%') && ips.includes(canonicalIPv6(bare))) return undefined;
  const reason = `IP: ${bare} is not in the cert's list: ${ips.join(', ')}`;
  return Object.assign(new Error(`Hostname/IP does not match certificate's altnames: ${reason}`), {
    code: 'ERR_TLS_CERT_ALTNAME_INVALID',
    reason,
    host: bare,
    cert,
  });
}
