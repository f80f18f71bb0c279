import { expect } from 'chai';
import {
  aclHeaders,
  ALL_USERS,
  allows,
  AUTHENTICATED_USERS,
  cannedGrants,
  copiedHeaders,
  OBJECT_ACL_HEADER,
  requestedAcl,
  S3Error,
  storedAcl,
  storedHeadersFromJson,
  withoutAcl,
} from '../../images/object-model/src/index.js';

const lookupOf = (headers: Record<string, string>) => (name: string) => headers[name];
const codeOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    if (err instanceof S3Error) return err.code;
    throw err;
  }
  return 'none';
};

describe('object model: access control (canned ACLs, grants, evaluation, storage with the object)', () => {
  it('reads canned ACLs and grant headers as S3 does: unknown canned InvalidArgument, canned with grants InvalidRequest', () => {
    expect(requestedAcl(lookupOf({}))).to.equal(undefined);
    expect(requestedAcl(lookupOf({ 'x-amz-acl': 'public-read' }))).to.deep.equal({ canned: 'public-read' });
    expect(requestedAcl(lookupOf({ 'x-amz-grant-read': `id="alice", uri="${ALL_USERS}"`, 'x-amz-grant-write-acp': 'id=bob' }))).to.deep.equal({
      grants: [
        { grantee: { id: 'alice' }, permission: 'READ' },
        { grantee: { group: ALL_USERS }, permission: 'READ' },
        { grantee: { id: 'bob' }, permission: 'WRITE_ACP' },
      ],
    });
    expect(codeOf(() => requestedAcl(lookupOf({ 'x-amz-acl': 'everyone' })))).to.equal('InvalidArgument');
    expect(codeOf(() => requestedAcl(lookupOf({ 'x-amz-acl': 'private', 'x-amz-grant-read': 'id=alice' })))).to.equal('InvalidRequest');
    expect(codeOf(() => requestedAcl(lookupOf({ 'x-amz-grant-read': 'uri="http://example.com/group"' })))).to.equal('InvalidArgument');
    expect(codeOf(() => requestedAcl(lookupOf({ 'x-amz-grant-read': 'alice' })))).to.equal('InvalidArgument');
    // A grant by e-mail address names its address (the gateway resolves it to a user); what is no address is unresolvable.
    expect(requestedAcl(lookupOf({ 'x-amz-grant-read': 'emailAddress="a@example.com"' }))).to.deep.equal({
      grants: [{ grantee: { email: 'a@example.com' }, permission: 'READ' }],
    });
    expect(codeOf(() => requestedAcl(lookupOf({ 'x-amz-grant-read': 'emailAddress="a b@example"' })))).to.equal('UnresolvableGrantByEmailAddress');
    // A form names the canned ACL in its `acl` field.
    expect(requestedAcl(lookupOf({}), 'authenticated-read')).to.deep.equal({ canned: 'authenticated-read' });
  });

  it('evaluates ACLs: the owner holds everything, FULL_CONTROL every permission, groups as S3 defines them', () => {
    const acl = { owner: 'alice', grants: [...cannedGrants('public-read', 'alice', 'alice'), { grantee: { id: 'bob' }, permission: 'FULL_CONTROL' as const }] };
    expect(allows(acl, 'alice', 'WRITE_ACP')).to.equal(true);
    expect(allows(acl, undefined, 'READ')).to.equal(true);
    expect(allows(acl, undefined, 'READ_ACP')).to.equal(false);
    expect(allows(acl, 'bob', 'WRITE_ACP')).to.equal(true);
    expect(allows(acl, 'carol', 'READ', true)).to.equal(false);
    const members = { owner: 'alice', grants: cannedGrants('authenticated-read', 'alice', 'alice') };
    expect([allows(members, 'carol', 'READ'), allows(members, undefined, 'READ')]).to.deep.equal([true, false]);
    expect(cannedGrants('bucket-owner-read', 'bob', 'alice')).to.deep.equal([
      { grantee: { id: 'bob' }, permission: 'FULL_CONTROL' },
      { grantee: { id: 'alice' }, permission: 'READ' },
    ]);
    expect(cannedGrants('public-read-write', 'alice', 'alice').map((g) => g.permission)).to.deep.equal(['FULL_CONTROL', 'READ', 'WRITE']);
    expect(allows({ owner: 'a', grants: [{ grantee: { group: AUTHENTICATED_USERS }, permission: 'READ' }] }, undefined, 'READ')).to.equal(false);
  });

  it('keeps the ACL among the stored headers: round trip, checked on the way in, never answered, never copied', () => {
    const acl = { owner: 'alice', grants: cannedGrants('public-read', 'alice', 'alice') };
    const headers = { 'cache-control': 'no-cache', ...aclHeaders(acl) };
    expect(storedAcl(storedHeadersFromJson(headers))).to.deep.equal(acl);
    expect(withoutAcl(headers)).to.deep.equal({ 'cache-control': 'no-cache' });
    expect(codeOf(() => storedHeadersFromJson({ [OBJECT_ACL_HEADER]: '{"o":"x y","g":[]}' }))).to.equal('InvalidArgument');
    // A copy has the ACL of its request, never its source's (S3: private unless the copy request gives one).
    expect(copiedHeaders(headers, undefined)).to.deep.equal({ 'cache-control': 'no-cache' });
    const mine = aclHeaders({ owner: 'bob', grants: [] });
    expect(copiedHeaders(headers, mine)).to.deep.equal({ 'cache-control': 'no-cache', ...mine });
  });
});
