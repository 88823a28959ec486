/**
 * The OpenAPI document's schemas: requests as JSON Schema from the zod schemas the API validates
 * with (../schemas/), answers from the zod schemas of ../answers.ts.
 * test/helpers/contract.ts checks every answer a test receives against them.
 */
import { z } from 'zod';
import { components } from '../answers.ts';
import { scheduleSchema } from '../schemas/calls.ts';

const COMPONENTS = '#/components/schemas/';

/** A reference to one of the document's component schemas. */
export const ref = (name: string) => ({ $ref: `${COMPONENTS}${name}` });

/**
 * A request's JSON Schema. A default is said in the field's description rather than as
 * `default`: generated clients (openapi-typescript) make a field with a default required,
 * where a request may leave it out.
 */
export const json = (schema: z.ZodType) =>
  withoutDefaults(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }));

function withoutDefaults<T>(node: T): T {
  if (Array.isArray(node)) return node.map(withoutDefaults) as T;
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(node)) if (name !== 'default') out[name] = withoutDefaults(value);
  if ('default' in node) {
    const said = `Default: ${JSON.stringify((node as { default: unknown }).default)}.`;
    out.description = typeof out.description === 'string' ? `${out.description} ${said}` : said;
  }
  return out as T;
}

/**
 * An answer's JSON Schema, from its zod schema: a registered answer (answers.ts `components`)
 * becomes a reference to its component. Left out, as a reader of the document needs none of
 * them: `additionalProperties: false` (a client should accept fields added later), the
 * date-time pattern (the format says it), the safe-integer bounds.
 */
export function answer(schema: z.ZodType): object {
  const id = components.get(schema)?.id;
  if (id !== undefined) return ref(id);
  const out = z.toJSONSchema(schema, { io: 'output', metadata: components, target: 'draft-2020-12' }) as Record<string, unknown>;
  delete out.$defs;
  return tidy(out);
}

/** The registered answers, by name, for `components.schemas`. */
export function answerComponents(): Record<string, object> {
  const { schemas } = z.toJSONSchema(components, {
    io: 'output',
    metadata: components,
    target: 'draft-2020-12',
    uri: (id) => `${COMPONENTS}${id}`,
  });
  return Object.fromEntries(Object.entries(schemas).map(([name, schema]) => [name, tidy(schema)]));
}

/** `anyOf: [X, null]` as X with `null` among its types (and its enum): the way a reader writes it. */
function orNull(node: Record<string, unknown>): Record<string, unknown> {
  const options = node.anyOf;
  if (!Array.isArray(options) || options.length !== 2) return node;
  const other = options.find((o: { type?: unknown }) => o.type !== 'null') as Record<string, unknown> | undefined;
  if (!options.some((o: { type?: unknown }) => o.type === 'null') || typeof other?.type !== 'string') return node;
  const { anyOf: _, ...rest } = node;
  const enumOrNull = Array.isArray(other.enum) ? { enum: [...other.enum, null] } : {};
  return { ...other, ...rest, type: [other.type, 'null'], ...enumOrNull };
}

const SAFE_INTEGER = { minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER };

function tidy<T>(node: T): T {
  if (Array.isArray(node)) return node.map(tidy) as T;
  if (node === null || typeof node !== 'object') return node;
  const record = orNull(node as Record<string, unknown>);
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(record)) {
    if (name === '$schema' || name === '$id' || (name === 'additionalProperties' && value === false)) continue;
    if (name === 'pattern' && record.format === 'date-time') continue;
    if (record.type === 'integer' && (name === 'minimum' || name === 'maximum') && value === SAFE_INTEGER[name]) continue;
    out[name] = name === '$ref' && typeof value === 'string' ? value.replace('#/$defs/', COMPONENTS) : tidy(value);
  }
  return out as T;
}

/** POST /v1/schedules: its `task` is an enqueue request, less the fields a firing refuses. */
export function scheduleRequest() {
  const body = json(scheduleSchema) as { properties: Record<string, object> };
  const task = {
    ...ref('EnqueueRequest'),
    description:
      'The task each firing enqueues, as POST /v1/tasks takes it, except delay_ms, run_at, expires_at, dedup_key, dedup_ttl_ms, group and parent_id (refused); ' +
      'ttl_ms counts from each slot. With overlap `queue`, concurrency_key and concurrency_limit are refused too.',
  };
  return { ...body, properties: { ...body.properties, task } };
}
