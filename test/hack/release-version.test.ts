// A release's version is written in several places; each must say package.json's.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { DEFAULT_SETTINGS } from '../../controllers/support/settings.js';

const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
const version = (JSON.parse(read('package.json')) as { version: string }).version;

describe('release version', () => {
  it('is a semantic version', () => {
    expect(version).to.match(/^\d+\.\d+\.\d+$/);
  });

  it('package-lock.json says the same for the project', () => {
    const lock = JSON.parse(read('package-lock.json')) as { version: string; packages: Record<string, { version?: string }> };
    expect([lock.version, lock.packages['']?.version]).to.deep.equal([version, version]);
  });

  it('the chart’s version and appVersion, and the operator’s default image tag, are the release', () => {
    const chart = read('charts/strata/Chart.yaml');
    expect(chart).to.match(new RegExp(`^version: ${version.replaceAll('.', '\\.')}$`, 'm'));
    expect(chart).to.match(new RegExp(`^appVersion: "${version.replaceAll('.', '\\.')}"$`, 'm'));
    expect(DEFAULT_SETTINGS.imageTag).to.equal(version);
  });

  it('every image is labelled with it and has it as STRATA_VERSION; the Dockerfiles’ examples tag it', () => {
    const shared = read('hack/images/Dockerfile');
    expect(shared).to.include(`ARG STRATA_VERSION=${version}\n`);
    expect(shared).to.include('LABEL org.opencontainers.image.version=${STRATA_VERSION}\n');
    expect(shared).to.include('ENV STRATA_VERSION=${STRATA_VERSION}\n');
    for (const name of readdirSync(path.join(root, 'images'))) {
      let dockerfile: string;
      try {
        dockerfile = read(`images/${name}/Dockerfile`);
      } catch {
        continue;
      }
      const tags = [...dockerfile.matchAll(/ghcr\.io\/strata-dev\/[\w-]+:(\d+\.\d+\.\d+)/g)].map((m) => m[1]);
      expect(tags.length, name).to.be.greaterThan(0);
      for (const tag of tags) expect(tag, name).to.equal(version);
    }
  });

  it('CHANGELOG.md’s newest entry is the release, with an upgrade note', () => {
    const changelog = read('CHANGELOG.md');
    const newest = /^## (\d+\.\d+\.\d+)\b/m.exec(changelog);
    expect(newest?.[1]).to.equal(version);
    const entry = changelog.slice(newest!.index, changelog.indexOf('\n## ', newest!.index + 1));
    expect(entry).to.match(/^### Upgrading from /m);
  });
});
