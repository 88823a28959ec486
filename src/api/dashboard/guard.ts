/**
 * What protects every dashboard request: the request-forgery check on state-changing requests,
 * and the headers every dashboard answer carries.
 */

function parsed(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/**
 * Whether a POST comes from a page of this app. Browsers send `Origin` with every POST; older
 * ones may send only `Sec-Fetch-Site` or a `Referer`. A request with none of them is refused:
 * the dashboard is for browsers, and the API (bearer keys, no cookies) is for everything else.
 *
 * With `publicOrigin` (`SLUICE_PUBLIC_URL`) the page must come from exactly that origin, scheme
 * included. Without it, from the host the request was sent to; the scheme is not compared, as
 * behind a TLS-terminating proxy the app sees http. A proxy that rewrites Host (nginx's default
 * `proxy_pass http://127.0.0.1:8787;` sends `Host: 127.0.0.1:8787`) needs one or the other:
 * `SLUICE_PUBLIC_URL`, or a proxy that passes the browser's Host on (`proxy_set_header Host $host`).
 */
export function sameOrigin(request: Request, publicOrigin: string | null): boolean {
  const host = new URL(request.url).host;
  const ours = (url: string) => {
    const at = parsed(url);
    return at !== null && (publicOrigin === null ? at.host === host : at.origin === publicOrigin);
  };
  const origin = request.headers.get('origin');
  if (origin !== null) return ours(origin);
  const site = request.headers.get('sec-fetch-site');
  if (site !== null) return site === 'same-origin';
  const referer = request.headers.get('referer');
  return referer !== null && ours(referer);
}

/** Whether the browser reaches this app over https (its public URL says so, or a proxy does). */
export function overHttps(request: Request, publicOrigin: string | null): boolean {
  return (
    publicOrigin?.startsWith('https:') === true ||
    new URL(request.url).protocol === 'https:' ||
    request.headers.get('x-forwarded-proto') === 'https'
  );
}

async function sha256Source(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
  return `'sha256-${btoa(String.fromCharCode(...digest))}'`;
}

/**
 * The pages' policy: only their one inline script and stylesheet (by hash) run, requests go to
 * this origin only, forms post here only, and no other site may frame them.
 */
export async function contentSecurityPolicy(script: string, style: string): Promise<string> {
  return [
    "default-src 'none'",
    `script-src ${await sha256Source(script)}`,
    `style-src ${await sha256Source(style)}`,
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/** Headers for every dashboard answer (`X-Content-Type-Options: nosniff` comes from the app). */
export function securityHeaders(policy: string): Record<string, string> {
  return {
    'content-security-policy': policy,
    'x-frame-options': 'DENY',
    // Pages show task bodies and results: never kept by a cache, never leaked in a Referer.
    'cache-control': 'no-store',
    'referrer-policy': 'same-origin',
  };
}
