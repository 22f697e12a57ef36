// An independent implementation of the DelegateOS SJT signing rules
// (protocol 0.2 §3.3, §3.4, §3.5, §4.1, §10.1 step 3), written for the Go
// interop tests on the libraries the TypeScript reference uses:
// @noble/ed25519, blakejs and canonicalize. It reads one JSON job on stdin
// and writes one JSON result on stdout.
import * as ed from '@noble/ed25519';
import { blake2b } from 'blakejs';
import canonicalize from 'canonicalize';

const b64u = (bytes) => Buffer.from(bytes).toString('base64url');
const unb64u = (s) => new Uint8Array(Buffer.from(s, 'base64url'));
const digest = (obj) => blake2b(new TextEncoder().encode(canonicalize(obj)), undefined, 32);

async function keyOf(seedHex) {
  const seed = new Uint8Array(Buffer.from(seedHex, 'hex'));
  return { seed, id: b64u(await ed.getPublicKeyAsync(seed)) };
}

async function signObj(key, obj) {
  return b64u(await ed.signAsync(digest(obj), key.seed));
}

async function verifyObj(id, obj, sig) {
  try {
    return await ed.verifyAsync(unb64u(sig), digest(obj), unb64u(id));
  } catch {
    return false;
  }
}

const serialize = (token) => b64u(new TextEncoder().encode(canonicalize(token)));
const deserialize = (s) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));

const ops = {
  // job.authority is complete except issuer, which comes from the seed.
  async mint(job) {
    const key = await keyOf(job.seed);
    const authority = { ...job.authority, issuer: key.id };
    const signature = await signObj(key, { authority });
    return {
      token: serialize({
        format: 'delegateos-sjt-v1',
        authority,
        attenuations: [],
        signatures: [{ signer: key.id, signature, covers: 'authority' }],
      }),
    };
  },
  async attenuate(job) {
    const key = await keyOf(job.seed);
    const token = deserialize(job.token);
    const attenuations = [...token.attenuations, { ...job.attenuation, attenuator: key.id }];
    const signature = await signObj(key, { authority: token.authority, attenuations });
    token.attenuations = attenuations;
    token.signatures.push({ signer: key.id, signature, covers: attenuations.length - 1 });
    return { token: serialize(token) };
  },
  // Checks every signature as §10.1 step 3 describes and returns the
  // revocation IDs of §3.5.
  async verify(job) {
    const token = deserialize(job.token);
    const problems = [];
    if (!(await verifyObj(token.authority.issuer, { authority: token.authority }, token.signatures[0]?.signature))) {
      problems.push('authority');
    }
    for (let i = 0; i < token.attenuations.length; i++) {
      const payload = { authority: token.authority, attenuations: token.attenuations.slice(0, i + 1) };
      if (!(await verifyObj(token.attenuations[i].attenuator, payload, token.signatures[i + 1]?.signature))) {
        problems.push(`attenuation ${i}`);
      }
    }
    const revocationIds = [token.authority, ...token.attenuations].map((b) => b64u(digest(b)));
    return { ok: problems.length === 0, problems, revocationIds, canonical: serialize(token) === job.token };
  },
  async revoke(job) {
    const key = await keyOf(job.seed);
    const entry = { revocationId: job.revocationId, revokedBy: key.id, revokedAt: job.revokedAt, scope: job.scope };
    return { entry: { ...entry, signature: await signObj(key, entry) } };
  },
  async verifyRevocation(job) {
    const { signature, ...entry } = job.entry;
    return { ok: await verifyObj(entry.revokedBy, entry, signature) };
  },
  async principal(job) {
    return { id: (await keyOf(job.seed)).id };
  },
};

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (c) => (input += c));
process.stdin.on('end', async () => {
  const job = JSON.parse(input);
  const op = ops[job.op];
  if (!op) {
    process.stderr.write(`unknown op ${job.op}\n`);
    process.exit(2);
  }
  process.stdout.write(JSON.stringify(await op(job)) + '\n');
});
