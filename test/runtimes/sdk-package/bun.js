/** The receiver on Bun: `SLUICE_URL=… PORT=… bun bun.js`. */
import { receivePushes } from './receiver.js';

const handle = receivePushes(process.env.SLUICE_URL);
Bun.serve({ hostname: '127.0.0.1', port: Number(process.env.PORT), fetch: (request) => handle(request) });
console.log(`listening on ${process.env.PORT}`);
