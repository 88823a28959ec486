/** Generates the client's types from an OpenAPI document, as a user would (openapi-typescript, stock options). */
import { mkdir, writeFile } from 'node:fs/promises';
import openapiTS, { astToString } from 'openapi-typescript';

export const GENERATED = new URL('./generated/schema.ts', import.meta.url);

export async function generateClientTypes(document: object): Promise<void> {
  const ast = await openapiTS(document as Parameters<typeof openapiTS>[0]);
  await mkdir(new URL('./generated/', import.meta.url), { recursive: true });
  await writeFile(GENERATED, astToString(ast));
}
