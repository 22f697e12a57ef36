package gate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// The messages of §9 as the spec writes them decode into the Go types
// strictly and encode back to the same JSON.
func TestDelegationMessagesRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		json string
		v    any
	}{
		{"delegate params (§9.1)", `{"contract":{"id":"ct_0123456789ab","version":"0.1"},"dct":"eyJmb3JtYXQiOiJ4In0","dctFormat":"delegateos-sjt-v1","delegationId":"del_f7e8d9c0b1a2","parentDelegationId":"del_000000000000"}`, &DelegateParams{}},
		{"accept (§9.2)", `{"accepted":true,"delegationId":"del_f7e8d9c0b1a2","estimatedDurationMs":30000,"estimatedCostMicrocents":50000}`, &DelegateResult{}},
		{"accept without estimates", `{"accepted":true,"delegationId":"del_f7e8d9c0b1a2"}`, &DelegateResult{}},
		{"reject (§9.3)", `{"accepted":false,"reason":"capability_mismatch","details":"Agent does not support web:search"}`, &DelegateResult{}},
		{"complete params (§9.4)", `{"delegationId":"del_f7e8d9c0b1a2","attestation":{"id":"att_0123456789ab","childAttestations":[]}}`, &CompleteParams{}},
		{"complete result", `{"delegationId":"del_f7e8d9c0b1a2","attestationId":"att_0123456789ab","status":"failed","verified":false,"problems":["output: schema"],"score":0.25}`, &CompleteResult{}},
		{"revoke params (§9.5)", `{"revocation":{"revocationId":"abc","revokedBy":"x","revokedAt":"2026-01-01T00:00:00.000Z","scope":"chain","signature":"s"}}`, &RevokeParams{}},
		{"revoke result", `{"revocationId":"abc","delegations":["del_f7e8d9c0b1a2"]}`, &RevokeResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := strictjson.Unmarshal([]byte(tt.json), tt.v); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := canon.Marshal(json.RawMessage(got))
			b, _ := canon.Marshal(json.RawMessage(tt.json))
			if !bytes.Equal(a, b) {
				t.Errorf("round trip:\n got %s\nwant %s", a, b)
			}
		})
	}
	// Members the messages do not define are refused, not ignored.
	var p DelegateParams
	if err := strictjson.Unmarshal([]byte(`{"dct":"x","delegationID":"del_f7e8d9c0b1a2"}`), &p); err == nil {
		t.Error("a re-cased member was accepted")
	}
}
