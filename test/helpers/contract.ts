/**
 * The document is the contract, in every tier: every answer a test receives from a Sluice
 * server (Node or Worker) is checked against `/openapi.json` — the operation its method and
 * path name, the schema for its status — with a JSON Schema validator (Ajv). Installed for every
 * test file (vitest `setupFiles`): the test process's `fetch` is wrapped, and a call whose
 * answer the document does not describe fails where it was made. Answers of undocumented paths
 * (the tests' own endpoints) and undocumented server errors (fault tests provoke some) are not
 * checked; a documented one (503) is.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { openApiDocument } from '../../src/api/openapi/document.ts';

type Content = Record<string, { schema: object }>;
type Operation = { responses: Record<string, { content?: Content }> };
type Doc = { paths: Record<string, Record<string, Operation>>; components: object };

const doc = openApiDocument() as Doc;
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
const validators = new Map<object, ValidateFunction>();
// Literal paths before templated ones: /v1/tasks/batch is not /v1/tasks/{id}.
const routes = Object.keys(doc.paths)
  .sort((a, b) => Number(a.includes('{')) - Number(b.includes('{')))
  .map((template) => ({ template, pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+').replace(/\./g, '\\.')}$`) }));

/** What is wrong with `response` as the answer to `method url`; `null` when it is as documented or not Sluice's to check. */
export async function contractProblem(method: string, url: URL, response: Response): Promise<string | null> {
  const route = routes.find((r) => r.pattern.test(url.pathname) && doc.paths[r.template]?.[method.toLowerCase()]);
  if (!route) return null;
  const where = `${method} ${url.pathname} → ${response.status}`;
  const operation = doc.paths[route.template]![method.toLowerCase()]!;
  const documented = operation.responses[String(response.status)] ?? operation.responses[`${String(response.status)[0]}XX`];
  // An undocumented server error is a failure of its own (fault tests provoke some); not the document's.
  if (!documented) return response.status >= 500 ? null : `${where}: status not in /openapi.json for ${method} ${route.template}`;
  const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
  const schema = documented.content?.[type]?.schema;
  const text = await response.text();
  if (!documented.content) return text === '' ? null : `${where}: a body where /openapi.json documents none`;
  if (!schema) return `${where}: content type "${type}" not in /openapi.json`;
  if (!type.endsWith('json')) return null;
  let validate = validators.get(schema);
  if (!validate) {
    validate = ajv.compile({ ...schema, components: doc.components });
    validators.set(schema, validate);
  }
  return validate(JSON.parse(text)) ? null : `${where}: the answer does not match /openapi.json: ${ajv.errorsText(validate.errors)}`;
}

/** Wraps the global `fetch` so that every answer from a Sluice server is checked. */
export function checkEveryAnswer(): void {
  const original = globalThis.fetch;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const response = await original(input, init);
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    const url = new URL(input instanceof Request ? input.url : String(input));
    const problem = await contractProblem(method.toUpperCase(), url, response.clone());
    if (problem) throw new Error(`contract: ${problem}`);
    return response;
  };
}
