// The SDK is compiled from its source in this repository, as a workspace package would be.
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));

export default {
  turbopack: { root, resolveAlias: { '@sluice/sdk': '../../../src/sdk/index.ts' } },
  // Written where the test reads it, and git and biome ignore.
  distDir: '.next',
};
