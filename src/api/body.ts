/** Reading a JSON (or form) request body within a size limit; every failure is a 4xx naming the cause. */
import { PayloadTooLargeError, SluiceError, ValidationError } from '../core/errors.ts';

/** Reads a JSON body of at most `limitBytes`; `options.empty` is what an empty body means (else a 400). */
export async function readJson(request: Request, limitBytes: number, options: { empty?: unknown } = {}): Promise<unknown> {
  const type = request.headers.get('content-type');
  if (type !== null && !/^application\/([\w.+-]*\+)?json\b/i.test(type.trim())) {
    throw new SluiceError(415, 'unsupported_media_type', `the body must be JSON (Content-Type: application/json), not ${type}`);
  }
  const declared = Number(request.headers.get('content-length') ?? '0');
  if (declared > limitBytes) throw new PayloadTooLargeError(limitBytes);
  const text = await readText(request, limitBytes);
  if (text.trim() === '') {
    if (options.empty !== undefined) return options.empty;
    throw new ValidationError([{ path: '', message: 'the request body is empty; send a JSON object' }]);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new SluiceError(400, 'invalid_json', `the body is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Whether a `Prefer` header (RFC 7240) asks for `return=minimal`: preferences are separated by
 * commas, parameters by semicolons, and a value may be quoted; an unknown preference is ignored.
 */
export function prefersMinimal(header: string | undefined): boolean {
  if (!header) return false;
  return header.split(',').some((preference) => {
    const [name, value = ''] = (preference.split(';')[0] ?? '').split('=').map((part) => part.trim());
    return name?.toLowerCase() === 'return' && value.replace(/^"(.*)"$/, '$1').toLowerCase() === 'minimal';
  });
}

/** Reads a form body (`application/x-www-form-urlencoded`, as the dashboard's forms send) of at most `limitBytes`. */
export async function readForm(request: Request, limitBytes: number): Promise<URLSearchParams> {
  const type = request.headers.get('content-type');
  if (type === null || !/^application\/x-www-form-urlencoded\b/i.test(type.trim())) {
    throw new SluiceError(415, 'unsupported_media_type', 'the body must be a form (Content-Type: application/x-www-form-urlencoded)');
  }
  if (Number(request.headers.get('content-length') ?? '0') > limitBytes) throw new PayloadTooLargeError(limitBytes);
  return new URLSearchParams(await readText(request, limitBytes));
}

async function readText(request: Request, limitBytes: number): Promise<string> {
  if (!request.body) return '';
  const reader = request.body.getReader();
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let size = 0;
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > limitBytes) {
        await reader.cancel().catch(() => {});
        throw new PayloadTooLargeError(limitBytes);
      }
      text += decoder.decode(value, { stream: true });
    }
    return text + decoder.decode();
  } catch (error) {
    if (error instanceof SluiceError) throw error;
    throw new SluiceError(400, 'invalid_body', 'the body is not valid UTF-8 or could not be read');
  }
}
