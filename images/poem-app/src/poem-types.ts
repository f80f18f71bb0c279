/**
 * The poem forms Strata offers. The generate request names a form by its stable `code`; stored poems
 * carry the human `label`, so history reads well even if a form's code is later renamed.
 */
export interface PoemType {
  code: string;
  label: string;
  /** One line on the form, shown to the person and given to the model as guidance. */
  description: string;
}

export const POEM_TYPES: readonly PoemType[] = [
  { code: 'sonnet', label: 'Sonnet', description: 'Fourteen lines of iambic pentameter with a closing turn.' },
  { code: 'haiku', label: 'Haiku', description: 'Three lines of five, seven and five syllables.' },
  { code: 'limerick', label: 'Limerick', description: 'Five lines, rhymed AABBA, light and playful.' },
  { code: 'free-verse', label: 'Free verse', description: 'Open form: no fixed metre or rhyme.' },
  { code: 'ode', label: 'Ode', description: 'An elevated address in praise of its subject.' },
  { code: 'acrostic', label: 'Acrostic', description: 'The first letters of the lines spell out the theme.' },
  { code: 'villanelle', label: 'Villanelle', description: 'Nineteen lines with two refrains and two rhymes.' },
  { code: 'ballad', label: 'Ballad', description: 'A story told in rhymed quatrains.' },
];

const byCode = new Map(POEM_TYPES.map((t) => [t.code, t]));
const byLabel = new Map(POEM_TYPES.map((t) => [t.label.toLowerCase(), t]));

export function poemTypeByCode(code: string): PoemType | undefined {
  return byCode.get(code);
}

/** Saved poems name their type by label; the code is accepted too so API clients need not translate. */
export function poemTypeByLabelOrCode(value: string): PoemType | undefined {
  return byLabel.get(value.trim().toLowerCase()) ?? byCode.get(value.trim());
}
