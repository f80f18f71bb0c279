// Whether a text search found anything that matches well, so that a nonsense query is told so instead
// of getting the nearest images as if they matched. Vectors are L2-normalised and the index ranks by
// squared L2 distance, so a result's cosine similarity is 1 - distance / 2. What counts as a good
// text-image match depends on the encoder: CLIP ViT-B/32 gives a matching caption a similarity of
// about 0.25–0.35 and unrelated text 0.1–0.2, so below 0.2 nothing matched (the cut-off clip-retrieval
// style tools use too); the test encoder gives a colour word against an image of that colour 0.93–0.99
// and nonsense 0.03–0.14 (measured over the test fixtures), so its cut-off is 0.5.
import type { SearchResultItem } from './search-service.js';

/** Least cosine similarity of a good text-image match, per encoder backbone (`describeModel`). */
export const MIN_TEXT_SIMILARITY: Readonly<Record<string, number>> = { 'ViT-B/32': 0.2, 'strata-test-clip': 0.5 };

export interface MatchQuality {
  /** The best result's cosine similarity to the query (null: no results). */
  bestSimilarity: number | null;
  /** True when results came back but none reaches the encoder's cut-off. */
  weakMatch: boolean;
  /** Said to the user when weakMatch. */
  hint?: string;
}

export const similarityOf = (distance: number) => 1 - distance / 2;

export function matchQuality(results: readonly SearchResultItem[], backbone: string): MatchQuality {
  if (!results.length) return { bestSimilarity: null, weakMatch: false };
  const best = Math.max(...results.map((r) => similarityOf(r.distance)));
  const bestSimilarity = Math.round(best * 1000) / 1000;
  const cutoff = MIN_TEXT_SIMILARITY[backbone] ?? MIN_TEXT_SIMILARITY['ViT-B/32'];
  if (best >= cutoff) return { bestSimilarity, weakMatch: false };
  return {
    bestSimilarity,
    weakMatch: true,
    hint: `No image matches this query well (best similarity ${bestSimilarity.toFixed(3)}, below ${cutoff} for ${backbone}): these are only the nearest images. Try other words.`,
  };
}
