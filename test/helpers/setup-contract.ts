/** Every test file: answers from Sluice are checked against /openapi.json (helpers/contract.ts). */
import { checkEveryAnswer } from './contract.ts';

checkEveryAnswer();
