#!/usr/bin/env python3
"""Generates hmac_vectors.json: envelopes signed by the LDP reference's own
Python SDK (sunilp/ldp-protocol, sdk/python), checked against an independent
implementation of the same signing input written here from the reference's
Rust source (src/signing.rs).

    git -C <ldp-protocol checkout> archive HEAD sdk/python/src | tar -x -C /tmp/ldpref
    python3 hmac_vectors.py /tmp/ldpref/sdk/python/src <commit> > hmac_vectors.json

Needs pydantic 2 (the SDK's one dependency besides httpx, which signing
does not import; a stub stands in for it). Each vector holds the envelope as
the SDK writes it (model_dump(by_alias=True): every member of its flat body
model, null when unused), the secret, the signing input and the signature.
"""
import hashlib
import hmac
import json
import sys
import types

src, commit = sys.argv[1], sys.argv[2]
sys.path.insert(0, src)
sys.modules.setdefault("httpx", types.ModuleType("httpx"))

from ldp_protocol.signing import sign_envelope, verify_envelope  # noqa: E402
from ldp_protocol.types.contract import BudgetPolicy, DelegationContract, FailurePolicy  # noqa: E402
from ldp_protocol.types.error import LdpError  # noqa: E402
from ldp_protocol.types.messages import LdpEnvelope, LdpMessageBody  # noqa: E402
from ldp_protocol.types.payload import PayloadMode  # noqa: E402
from ldp_protocol.types.provenance import Provenance  # noqa: E402


def independent_input(env: dict) -> bytes:
    """The signing input of src/signing.rs, from the envelope's JSON."""
    parts = [env["from"], env["to"], env["session_id"], env["timestamp"], env["message_id"]]
    if env.get("nonce") is not None:
        parts.append(env["nonce"])
    body = env["body"]
    t = body["type"]
    if t == "HELLO":
        key = body["delegate_id"]
    elif t == "SESSION_ACCEPT":
        key = body["session_id"]
    elif t == "SESSION_REJECT":
        key = body["reason"]
    elif t == "TASK_SUBMIT":
        key = body["task_id"] + "|" + body["skill"]
    elif t in ("TASK_UPDATE", "TASK_RESULT", "TASK_FAILED", "TASK_CANCEL"):
        key = body["task_id"]
    else:
        key = ""
    return ("|".join(parts) + "|" + key + "|" + t).encode()


prov = Provenance.create(
    "ldp:delegate:qwen3-8b-reasoning",
    "qwen3-8b-2026.01",
    payload_mode_used=PayloadMode.SEMANTIC_FRAME,
    confidence=0.82,
    session_id="550e8400-e29b-41d4-a716-446655440000",
    timestamp="2026-03-09T10:00:09Z",
)
contract = DelegationContract(
    contract_id="c-1",
    objective="Summarize the document",
    success_criteria=["<=300 words"],
    created_at="2026-03-09T10:00:00Z",
    deadline="2026-03-09T11:00:00Z",
)
contract.policy.budget = BudgetPolicy(max_tokens=5000, max_cost_usd=0.05)
contract.policy.failure_policy = FailurePolicy.FAIL_CLOSED

SID = "550e8400-e29b-41d4-a716-446655440000"
bodies = [
    ("hello", "", LdpMessageBody.hello("ldp:delegate:router-alpha", [PayloadMode.SEMANTIC_FRAME, PayloadMode.TEXT])),
    ("manifest", "", LdpMessageBody.capability_manifest({"skills": ["reasoning"], "supported_modes": ["text"]})),
    ("propose", "", LdpMessageBody.session_propose({"preferred_payload_modes": ["semantic_frame", "text"], "ttl_secs": 3600, "trust_domain": "research.internal"})),
    ("accept", SID, LdpMessageBody.session_accept(SID, PayloadMode.SEMANTIC_FRAME)),
    ("reject", "", LdpMessageBody.session_reject("Trust domain 'x' not trusted by 'research.internal' — ünïcode")),
    ("submit", SID, LdpMessageBody.task_submit("task-001", "reasoning", {"task_type": "analysis", "instruction": "Compare"})),
    ("submit-contract", SID, LdpMessageBody.task_submit("task-002", "reasoning", "plain text input", contract)),
    ("update", SID, LdpMessageBody.task_update("task-001", 0.5, "halfway")),
    ("result", SID, LdpMessageBody.task_result("task-001", {"analysis": "modular monolith"}, prov)),
    ("failed", SID, LdpMessageBody.task_failed("task-001", "semantic_frame validation failed")),
    ("cancel", SID, LdpMessageBody.task_cancel("task-001")),
    ("attestation", SID, LdpMessageBody(type="ATTESTATION", claim={"quality": 0.9}, evidence={"runs": 3})),
    ("close", SID, LdpMessageBody.session_close("done")),
    ("close-no-reason", SID, LdpMessageBody.session_close()),
]

vectors = []
for i, (name, sid, body) in enumerate(bodies):
    for variant in ("", "nonce"):
        env = LdpEnvelope.create(
            session_id=sid,
            from_id="ldp:delegate:router-alpha" if i % 2 == 0 else "ldp:delegate:qwen3-8b-reasoning",
            to_id="ldp:delegate:qwen3-8b-reasoning" if i % 2 == 0 else "ldp:delegate:router-alpha",
            body=body,
            payload_mode=PayloadMode.SEMANTIC_FRAME if name in ("submit", "result") else PayloadMode.TEXT,
        )
        env.message_id = "msg-%03d%s" % (i + 1, "-n" if variant else "")
        # Both timestamp spellings the SDKs write: Python's isoformat and RFC 3339 with Z.
        env.timestamp = "2026-03-09T10:00:%02d.123456+00:00" % i if i % 2 else "2026-03-09T10:00:%02dZ" % i
        if variant:
            env.nonce = "%032x" % (0xA1B2C3D4 * (i + 1))
        secret = "test-secret" if i % 3 else "s3cret with spaces and ünïcode"
        sig = sign_envelope(env, secret)
        assert verify_envelope(env, secret, sig)
        env.signature = sig
        env.signature_algorithm = "hmac-sha256"
        doc = json.loads(env.model_dump_json(by_alias=True))
        inp = independent_input(doc)
        mine = hmac.new(secret.encode(), inp, hashlib.sha256).hexdigest()
        assert mine == sig, (name, variant, mine, sig)
        vectors.append({
            "name": name + ("-" + variant if variant else ""),
            "secret": secret,
            "input": inp.decode(),
            "signature": sig,
            "envelope": doc,
        })

json.dump({
    "reference": "github.com/sunilp/ldp-protocol@" + commit + " sdk/python/src/ldp_protocol/signing.py",
    "vectors": vectors,
}, sys.stdout, indent=1, ensure_ascii=False)
sys.stdout.write("\n")
