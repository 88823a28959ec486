/**
 * What protects every dashboard request: the request-forgery check on state-changing requests,
 * and the headers every dashboard answer carries.
 */

function hostOf(url: string): string | null {
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
}

/**
 * Whether a POST comes from a page of this host. Browsers send `Origin` with every POST; older
 * ones may send only `Sec-Fetch-Site` or a `Referer`. A request with none of them is refused:
 * the dashboard is for browsers, and the API (bearer keys, no cookies) is for everything else.
 * The host is compared, not the scheme: behind a TLS-terminating proxy the app sees http.
 */
export function sameOrigin(request: Request): boolean {
  const host = new URL(request.url).host;
  const origin = request.headers.get('origin');
  if (origin !== null) return hostOf(origin) === host;
  const site = request.headers.get('sec-fetch-site');
  if (site !== null) return site === 'same-origin';
  const referer = request.headers.get('referer');
  return referer !== null && hostOf(referer) === host;
}

/** Whether the browser reached this app over https (directly, or through a proxy that says so). */
export function overHttps(request: Request): boolean {
  return new URL(request.url).protocol === 'https:' || request.headers.get('x-forwarded-proto') === 'https';
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
