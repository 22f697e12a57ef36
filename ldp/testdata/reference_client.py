#!/usr/bin/env python3
"""Runs the LDP reference's own Python client (sunilp/ldp-protocol,
sdk/python) against a delegate: discover, HELLO, SESSION_PROPOSE and one
TASK_SUBMIT, HMAC-signed with SECRET. httpx, which the client imports, is
replaced by a urllib stand-in, so only pydantic 2 is needed.

    git -C <ldp-protocol checkout> archive HEAD sdk/python/src | tar -x -C /tmp/ldpref
    python3 reference_client.py /tmp/ldpref/sdk/python/src URL SECRET

It exits non-zero with the client's error when the delegate refuses (a
wrong SECRET gives "Session rejected [signature_invalid]").
"""
import asyncio, json, sys, types, urllib.request, urllib.error
sys.path.insert(0, sys.argv[1])
# A stand-in for httpx with urllib: the reference's own client code runs unchanged.
httpx = types.ModuleType("httpx")
class Resp:
    def __init__(self, code, body): self.status_code, self._b = code, body
    def json(self): return json.loads(self._b)
    def raise_for_status(self):
        if self.status_code >= 400: raise RuntimeError(f"HTTP {self.status_code}: {self._b!r}")
class AsyncClient:
    def __init__(self, timeout=None): pass
    async def get(self, url): return self._do(urllib.request.Request(url))
    async def post(self, url, json=None):
        import json as j
        return self._do(urllib.request.Request(url, data=j.dumps(json).encode(), headers={"Content-Type": "application/json"}))
    def _do(self, req):
        try:
            with urllib.request.urlopen(req) as r: return Resp(r.status, r.read())
        except urllib.error.HTTPError as e: return Resp(e.code, e.read())
    async def aclose(self): pass
httpx.AsyncClient = AsyncClient
sys.modules["httpx"] = httpx
from ldp_protocol.client import LdpClient
from ldp_protocol.types.session import SessionConfig
from ldp_protocol.types.payload import PayloadMode

async def main(url, secret):
    c = LdpClient(delegate_id="ldp:delegate:py-router", signing_secret=secret)
    card = await c.discover(url)
    print("discover:", card.delegate_id, card.supported_payload_modes)
    s = await c.establish_session(url)
    print("session:", s.session_id, s.payload.mode)
    r = await c.submit_task(url, skill="reasoning", input_data={"task_type": "analysis", "instruction": "Compare"})
    print("result:", json.dumps(r, default=str)[:400])
asyncio.run(main(sys.argv[2], sys.argv[3]))
