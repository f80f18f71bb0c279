/**
 * The poem forms Strata offers. The generate request names a form by its stable `code`; stored poems
 * carry the human `label`, so history reads well even if a form's code is later renamed.
 */
export interface PoemType {
  code: string;
  label: string;
  /** One line on the form, shown to the person and given to the model as guidance. */
  description: string;
  /**
   * Lines per stanza: the poem has exactly their sum of non-empty lines, stanzas set apart by a blank
   * line. Forms without a fixed count (free verse, ode, ballad) get the usual shape of the form.
   */
  stanzas: readonly number[];
}

export const POEM_TYPES: readonly PoemType[] = [
  { code: 'sonnet', label: 'Sonnet', description: 'Fourteen lines of iambic pentameter with a closing turn.', stanzas: [4, 4, 4, 2] },
  { code: 'haiku', label: 'Haiku', description: 'Three lines of five, seven and five syllables.', stanzas: [3] },
  { code: 'limerick', label: 'Limerick', description: 'Five lines, rhymed AABBA, light and playful.', stanzas: [5] },
  { code: 'free-verse', label: 'Free verse', description: 'Open form: no fixed metre or rhyme.', stanzas: [4, 4] },
  { code: 'ode', label: 'Ode', description: 'An elevated address in praise of its subject.', stanzas: [10] },
  { code: 'acrostic', label: 'Acrostic', description: 'The first letters of the lines spell out the theme.', stanzas: [] },
  { code: 'villanelle', label: 'Villanelle', description: 'Nineteen lines with two refrains and two rhymes.', stanzas: [3, 3, 3, 3, 3, 4] },
  { code: 'ballad', label: 'Ballad', description: 'A story told in rhymed quatrains.', stanzas: [4, 4, 4] },
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
