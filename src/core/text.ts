/** Text that Postgres and HTTP can carry: no NUL, no lone surrogates, bounded length. */

/** Makes any text storable in a Postgres `text` or `jsonb` value. */
export function storable(text: string): string {
  return text.replace(/\0/g, '\uFFFD').toWellFormed();
}

/** Cuts a text to at most `max` UTF-16 units, without splitting a surrogate pair. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return text.slice(0, end);
}

/** Problems a client-given string can have that would break storage or a header, or `null`. */
export function textProblem(text: string): string | null {
  if (text.includes('\0')) return 'must not contain NUL characters';
  if (!text.isWellFormed()) return 'must be well-formed Unicode (it has a lone surrogate)';
  return null;
}

/** Header values are sent as they are: printable ASCII and tabs only. */
export function headerValueProblem(text: string): string | null {
  return /^[\t\x20-\x7e]*$/.test(text) ? null : 'must be printable ASCII (encode other characters yourself)';
}
