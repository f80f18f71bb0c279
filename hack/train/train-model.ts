/**
 * `npm run train-model`: trains one of the built-in models (`--model`, default strata-verse).
 *   strata-verse  verse from the `fortunes` package's songs and poems, with its own BPE tokenizer (train-verse.ts)
 *   strata-tiny   the copy task over content ids (train-tiny.ts)
 * Each script's own options follow (see the file).
 */
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { model: { type: 'string', default: 'strata-verse' } }, strict: false });
if (values.model === 'strata-verse') await import('./train-verse.js');
else if (values.model === 'strata-tiny') await import('./train-tiny.js');
else throw new Error(`--model must be strata-verse or strata-tiny, got ${String(values.model)}`);
