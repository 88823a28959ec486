/** The zod pieces every wire schema of the API builds on. */
import { z } from 'zod';
import { headerValueProblem, textProblem } from '../../core/text.ts';

/** An HTTP header's name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A string Postgres can store: no NUL, no lone surrogates. */
export const text = () =>
  z.string().check((ctx) => {
    const problem = textProblem(ctx.value);
    if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
  });

/** A string sent as a header value as it is. */
export const headerText = () =>
  z.string().check((ctx) => {
    const problem = headerValueProblem(ctx.value);
    if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
  });
