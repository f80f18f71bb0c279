// The four agent tools, in the chat-completions function-calling format, and their executor.
import type { ChatCompletionFunctionTool } from 'openai/resources/chat/completions';
import type { Viewer } from '../image-access.js';
import { InputError, type SearchService } from '../search-service.js';

/** A tool in the function-calling format: its arguments are a JSON object with these properties. */
function tool(name: string, description: string, properties: Record<string, object> = {}, required: string[] = []): ChatCompletionFunctionTool {
  return { type: 'function', function: { name, description, parameters: { type: 'object', properties, ...(required.length ? { required } : {}) } } };
}

const TOPK = { type: 'integer', description: 'how many results (default 20)', minimum: 1 };

export const TOOLS: ChatCompletionFunctionTool[] = [
  tool(
    'search_by_text',
    'Find indexed images that match a text description, closest first.',
    { query: { type: 'string', description: 'what the images should show' }, topk: TOPK },
    ['query'],
  ),
  tool(
    'search_by_image_id',
    'Find images similar to an already indexed image, given its id.',
    { image_id: { type: 'integer', description: 'id of an indexed image' }, topk: TOPK },
    ['image_id'],
  ),
  tool('get_index_status', 'Report the image index: vectors in the main index and the buffer, deleted ids, training state, running merge or rebuild.'),
  tool(
    'add_images',
    'Add images to the index by path relative to the image directory; they are searchable at once.',
    { image_paths: { type: 'array', items: { type: 'string' }, description: 'image paths' } },
    ['image_paths'],
  ),
];

/** Tools that change the index: they need the same token as the index routes. */
export const WRITE_TOOLS: ReadonlySet<string> = new Set(['add_images']);

/** The tools a caller may use: all, or only those that read. */
export function toolsFor(canWrite: boolean): ChatCompletionFunctionTool[] {
  return canWrite ? TOOLS : TOOLS.filter((t) => !WRITE_TOOLS.has(t.function.name));
}

export class UnknownToolError extends InputError {
  constructor(name: string) {
    super(`unknown tool ${JSON.stringify(name)}; known: ${TOOLS.map((t) => t.function.name).join(', ')}`, 404);
  }
}

/**
 * Run a tool by name with JSON arguments (already parsed); bad arguments are InputErrors. A tool that
 * changes the index runs only with `canWrite` (the caller is an admin); searches show what `viewer` may read.
 */
export async function callTool(
  service: SearchService,
  name: string,
  args: unknown,
  { canWrite = false, viewer }: { canWrite?: boolean; viewer: Viewer },
): Promise<unknown> {
  if (WRITE_TOOLS.has(name) && !canWrite)
    throw new InputError(`${name} changes the index: it needs the admin key or an admin's token (Authorization: Bearer ...)`, 401);
  const a = (args && typeof args === 'object' ? args : {}) as Record<string, unknown>;
  switch (name) {
    case 'search_by_text': {
      if (typeof a.query !== 'string' || !a.query.trim()) throw new InputError('search_by_text needs a non-empty string "query"');
      const results = await service.searchTexts([a.query], service.topk(a.topk), viewer);
      return { query: a.query, results };
    }
    case 'search_by_image_id': {
      if (!Number.isInteger(a.image_id)) throw new InputError('search_by_image_id needs an integer "image_id"');
      const results = await service.searchSimilar(a.image_id as number, service.topk(a.topk), viewer);
      return { image_id: a.image_id, results };
    }
    case 'get_index_status':
      return service.index.status();
    case 'add_images':
      return service.addPaths(a.image_paths, viewer, 'image_paths');
    default:
      throw new UnknownToolError(name);
  }
}
