// A Next.js App Router route handler, as the SDK's README writes one: the handler is the route.
import { createHandler } from '@sluice/sdk';

export const POST = createHandler(async (push) => ({ done: 'next', got: push.json() }), {
  sluiceUrl: process.env.SLUICE_URL,
  // Next.js hands a route `http://localhost:<port>/…` as its URL whatever the request's Host, so
  // the URL Sluice pushed to (the signature's audience) is named: this app's public origin.
  url: (request) => {
    const { pathname, search } = new URL(request.url);
    return new URL(pathname + search, process.env.PUBLIC_ORIGIN).href;
  },
});
