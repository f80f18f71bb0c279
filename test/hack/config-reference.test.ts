import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { CONFIG_REFERENCE_PATH, CONFIGURED_SERVICES, renderConfigReference } from '../../hack/config-reference.js';

describe('configuration reference (hack/docs/configuration-reference.md)', function () {
  this.timeout(60_000);
  const page = renderConfigReference();

  it('is what the zod schemas render (run `npm run gen-config-docs` after changing one)', () => {
    expect(readFileSync(CONFIG_REFERENCE_PATH, 'utf8')).to.equal(page);
  });

  it('lists every variable of every service, each with its default and a description', () => {
    for (const service of CONFIGURED_SERVICES) {
      const section = page.split(`## ${service.name}\n`)[1]!.split('\n## ')[0]!;
      for (const name of Object.keys(service.schema.shape)) {
        const row = section.split('\n').find((line) => line.startsWith(`| \`${name}\` |`));
        expect(row, `${service.name}: ${name}`).to.be.a('string');
        const [, , fallback, , words] = row!.split(/(?<!\\)\|/).map((c) => c.trim());
        expect(fallback, `${service.name}: ${name} default`).to.not.equal('');
        expect(words, `${service.name}: ${name} description`).to.not.equal('');
      }
    }
  });

  it('tells required variables, defaults and unset apart as the schemas do', () => {
    const gateway = page.split('## gateway\n')[1]!;
    expect(gateway).to.match(/\| `STRATA_JWT_SECRET` \| \*\*required\*\* \| at least 32 characters \|/);
    expect(gateway).to.match(/\| `STRATA_GATEWAY_PORT` \| `9000` \| integer 0–65535 \|/);
    expect(gateway).to.match(/\| `STRATA_PUBLIC_URL` \| unset \| URL \|/);
  });
});
