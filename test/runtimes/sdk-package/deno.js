/** The receiver on Deno: `SLUICE_URL=… PORT=… deno run --allow-net --allow-env --allow-read deno.js`. */
import { receivePushes } from './receiver.js';

const handle = receivePushes(Deno.env.get('SLUICE_URL'));
Deno.serve(
  { hostname: '127.0.0.1', port: Number(Deno.env.get('PORT')), onListen: ({ port }) => console.log(`listening on ${port}`) },
  (request) => handle(request),
);
