/**
 * Reads the Postgres frontend messages in a client's byte stream (the Neon stand-in's WebSocket
 * path), for counting and tracing round trips: each message's type byte, and the statement
 * text a simple query, a parse or a bind of a named statement carries. Development only.
 */

/** One frontend message: its type byte (`'Q'`, `'P'`, `'B'`, `'E'`, `'S'`, `'p'`…), or `startup`/`ssl`. */
export interface FrontendMessage {
  type: string;
  /** The statement's text, for `Q`, `P` and a `B` of a statement parsed before. */
  text?: string;
}

const SSL_REQUEST = 80_877_103;
const GSSENC_REQUEST = 80_877_104;

export class FrontendReader {
  #buffer: Buffer = Buffer.alloc(0);
  #started = false;
  /** Named prepared statements' texts (`''` is the unnamed one). */
  #statements = new Map<string, string>();

  /** Feeds the next bytes the client sent; returns the messages they complete. */
  read(chunk: Buffer): FrontendMessage[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const out: FrontendMessage[] = [];
    for (;;) {
      if (!this.#started) {
        if (this.#buffer.length < 8) break;
        const length = this.#buffer.readInt32BE(0);
        if (this.#buffer.length < length) break;
        const code = this.#buffer.readInt32BE(4);
        const request = code === SSL_REQUEST || code === GSSENC_REQUEST;
        out.push({ type: request ? 'ssl' : 'startup' });
        if (!request) this.#started = true;
        this.#buffer = this.#buffer.subarray(length);
        continue;
      }
      if (this.#buffer.length < 5) break;
      const length = this.#buffer.readInt32BE(1);
      if (this.#buffer.length < 1 + length) break;
      const type = String.fromCharCode(this.#buffer[0] ?? 0);
      const body = this.#buffer.subarray(5, 1 + length);
      out.push(this.#describe(type, body));
      this.#buffer = this.#buffer.subarray(1 + length);
    }
    return out;
  }

  #describe(type: string, body: Buffer): FrontendMessage {
    const strings = (n: number): string[] => {
      const parts: string[] = [];
      let at = 0;
      for (let i = 0; i < n; i++) {
        const end = body.indexOf(0, at);
        if (end < 0) break;
        parts.push(body.toString('utf8', at, end));
        at = end + 1;
      }
      return parts;
    };
    if (type === 'Q') return { type, text: strings(1)[0] ?? '' };
    if (type === 'P') {
      const [name = '', text = ''] = strings(2);
      this.#statements.set(name, text);
      return { type, text };
    }
    if (type === 'B') {
      const [, statement = ''] = strings(2);
      const text = this.#statements.get(statement);
      return text === undefined ? { type } : { type, text };
    }
    return { type };
  }
}
