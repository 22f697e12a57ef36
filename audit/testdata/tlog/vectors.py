#!/usr/bin/env python3
"""A second implementation of the audit log's tree formats (docs/receipts.md),
written from RFC 6962, C2SP tlog-checkpoint and C2SP signed-note with hashlib
only (Ed25519 from RFC 8032's reference code). It reads vectors.log and
writes vectors.json, which audit.TestVectors holds the Go implementation to:

    python3 vectors.py vectors.log > vectors.json
"""
import base64
import hashlib
import json
import sys

# --- RFC 6962 Merkle tree -------------------------------------------------


def sha256(b):
    return hashlib.sha256(b).digest()


def leaf_hash(entry):
    """The leaf of an entry: the RFC 6962 leaf hash of its digest."""
    return sha256(b"\x00" + sha256(entry))


def node_hash(left, right):
    return sha256(b"\x01" + left + right)


def largest_pow2_below(n):
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves):
    if len(leaves) == 0:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = largest_pow2_below(len(leaves))
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def path(m, leaves):
    """RFC 6962 2.1.1 PATH(m, D[n]): the inclusion proof of leaf m."""
    if len(leaves) <= 1:
        return []
    k = largest_pow2_below(len(leaves))
    if m < k:
        return path(m, leaves[:k]) + [mth(leaves[k:])]
    return path(m - k, leaves[k:]) + [mth(leaves[:k])]


def subproof(m, leaves, b):
    n = len(leaves)
    if m == n:
        return [] if b else [mth(leaves)]
    k = largest_pow2_below(n)
    if m <= k:
        return subproof(m, leaves[:k], b) + [mth(leaves[k:])]
    return subproof(m - k, leaves[k:], False) + [mth(leaves[:k])]


def consistency(m, leaves):
    """RFC 6962 2.1.2 PROOF(m, D[n])."""
    return subproof(m, leaves, True)


# --- did:key and Ed25519 (RFC 8032 reference verification) ----------------

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b58decode(s):
    n = 0
    for c in s:
        n = n * 58 + B58.index(c)
    out = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\x00" * (len(s) - len(s.lstrip("1"))) + out


def did_key_public(did):
    raw = b58decode(did[len("did:key:z"):])
    assert raw[:2] == b"\xed\x01", "not an Ed25519 did:key"
    return raw[2:]


p = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
d = -121665 * pow(121666, p - 2, p) % p
I = pow(2, (p - 1) // 4, p)


def xrecover(y):
    xx = (y * y - 1) * pow(d * y * y + 1, p - 2, p)
    x = pow(xx, (p + 3) // 8, p)
    if (x * x - xx) % p != 0:
        x = x * I % p
    if x % 2 != 0:
        x = p - x
    return x


By = 4 * pow(5, p - 2, p) % p
Bpt = (xrecover(By) % p, By, 1, xrecover(By) * By % p)


def padd(P, Q):
    A = (P[1] - P[0]) * (Q[1] - Q[0]) % p
    B_ = (P[1] + P[0]) * (Q[1] + Q[0]) % p
    C = 2 * P[3] * Q[3] * d % p
    D = 2 * P[2] * Q[2] % p
    E, F, G, H = B_ - A, D - C, D + C, B_ + A
    return (E * F % p, G * H % p, F * G % p, E * H % p)


def smul(s, P):
    Q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            Q = padd(Q, P)
        P = padd(P, P)
        s >>= 1
    return Q


def pequal(P, Q):
    return (P[0] * Q[2] - Q[0] * P[2]) % p == 0 and (P[1] * Q[2] - Q[1] * P[2]) % p == 0


def decompress(s):
    y = int.from_bytes(s, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = xrecover(y)
    if x & 1 != sign:
        x = p - x
    return (x, y, 1, x * y % p)


def ed25519_verify(pub, msg, sig):
    A = decompress(pub)
    R = decompress(sig[:32])
    s = int.from_bytes(sig[32:], "little")
    if s >= L:
        return False
    h = int.from_bytes(hashlib.sha512(sig[:32] + pub + msg).digest(), "little") % L
    return pequal(smul(s, Bpt), padd(R, smul(h, A)))


# --- the log ---------------------------------------------------------------


def main(log_path):
    with open(log_path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n")
    lines = data[:-1].split(b"\n")
    leaves = [leaf_hash(l) for l in lines]
    b64 = lambda h: base64.b64encode(h).decode()
    out = {"leaves": [h.hex() for h in leaves], "roots": [b64(mth(leaves[: i + 1])) for i in range(len(leaves))]}
    checks = []
    for i, l in enumerate(lines):
        entry = json.loads(l)
        if entry.get("schema_version") != "audit_checkpoint/3":
            continue
        signer = entry["proof"]["verificationMethod"].split("#")[0]
        pub = did_key_public(signer)
        origin = "audit.delegateos/" + signer[len("did:key:"):]
        note = entry["checkpoint"]
        body, sigs = note.split("\n\n", 1)
        body += "\n"
        o, size, root = body.split("\n")[:3]
        assert o == origin and int(size) == i == entry["length"], (o, size, i)
        assert root == b64(mth(leaves[:i])), "the checkpoint's root is not the tree's"
        key_hash = sha256(origin.encode() + b"\n\x01" + pub)[:4]
        sig_line = sigs.rstrip("\n").split("\n")[0]
        dash, name, sig64 = sig_line.split(" ")
        assert dash == "\u2014" and name == origin
        sig = base64.b64decode(sig64)
        assert sig[:4] == key_hash, "key hash"
        assert ed25519_verify(pub, body.encode(), sig[4:]), "the checkpoint's signature does not verify"
        out["origin"], out["public_key"], out["key_hash"] = origin, pub.hex(), key_hash.hex()
        checks.append({"line": i + 1, "size": i, "root": root, "body": body})
    out["checkpoints"] = checks
    size = checks[-1]["size"]
    out["inclusion"] = [{"index": m, "size": size, "proof": [b64(h) for h in path(m, leaves[:size])]} for m in range(size)]
    out["consistency"] = [{"old": m, "new": size, "proof": [b64(h) for h in consistency(m, leaves[:size])]} for m in range(1, size)]
    for a, b in zip(checks, checks[1:]):
        out["consistency"].append({"old": a["size"], "new": b["size"], "proof": [b64(h) for h in consistency(a["size"], leaves[: b["size"]])]})
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "vectors.log")
