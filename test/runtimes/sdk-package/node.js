/** The receiver on Node's own HTTP server: `SLUICE_URL=… PORT=… node node.js`. */
import { createServer } from 'node:http';
import { receivePushes } from './receiver.js';

const handle = receivePushes(process.env.SLUICE_URL);
const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  const request = new Request(new URL(req.url, `http://${req.headers.host}`), {
    method: req.method,
    headers,
    body: req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks),
  });
  const response = await handle(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
});
server.listen(Number(process.env.PORT), '127.0.0.1', () => console.log(`listening on ${process.env.PORT}`));
