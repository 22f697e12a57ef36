package ldp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// wireEnvelope is the envelope as JSON. The nonce is a pointer so that a
// present empty nonce (which the reference's HMAC would sign as "|") is
// told from an absent one.
type wireEnvelope struct {
	MessageID          string            `json:"message_id"`
	SessionID          string            `json:"session_id"`
	From               string            `json:"from"`
	To                 string            `json:"to"`
	Body               json.RawMessage   `json:"body"`
	PayloadMode        PayloadMode       `json:"payload_mode"`
	Timestamp          string            `json:"timestamp"`
	Provenance         *Provenance       `json:"provenance"`
	Signature          *string           `json:"signature,omitempty"`
	SignatureAlgorithm *string           `json:"signature_algorithm,omitempty"`
	Signer             *string           `json:"signer,omitempty"`
	Nonce              *string           `json:"nonce,omitempty"`
	DelegateOS         *DelegateOSMember `json:"delegateos,omitempty"`
}

// requiredMembers must be present (and not null) in every envelope.
var requiredMembers = []string{"message_id", "session_id", "from", "to", "body", "payload_mode", "timestamp"}

// ParseEnvelope reads an envelope from untrusted bytes (see the package
// doc for what is refused). A refusal is an *Error with ReasonMalformed.
// It checks no signature: that is a Verifier's work.
func ParseEnvelope(data []byte) (*Envelope, error) {
	if len(data) > MaxEnvelopeSize {
		return nil, malformed("envelope is %d bytes, at most %d", len(data), MaxEnvelopeSize)
	}
	// strictjson.Unmarshal checks what strictjson.Check does (UTF-8,
	// duplicate members, depth) before anything else: the bytes are read
	// strictly once. Its refusal is reported as before: a Check failure,
	// else not an object or a member missing, else the decoder's.
	var w wireEnvelope
	if err := strictjson.Unmarshal(data, &w); err != nil {
		if cerr := strictjson.Check(data); cerr != nil {
			return nil, malformed("%v", cerr)
		}
		if merr := requireMembers(data); merr != nil {
			return nil, merr
		}
		return nil, malformed("%v", err)
	}
	if err := requireMembers(data); err != nil {
		return nil, err
	}
	signed := w.SignatureAlgorithm != nil && *w.SignatureAlgorithm == AlgEd25519
	if signed {
		// The signature covers the JCS form: the bytes must say the same.
		if err := checkJCSNumbers(data); err != nil {
			return nil, err
		}
	}
	body, err := parseBody(w.Body)
	if err != nil {
		return nil, malformed("body: %v", err)
	}
	if res, ok := body.(*TaskResult); ok && w.Provenance != nil {
		// The envelope's provenance usually repeats the result's: the
		// same attestation bytes are verified once (shareVerified).
		shareVerified(w.Provenance.DelegateOS, res.Provenance.DelegateOS)
	}
	if b, ok := body.(*TaskSubmit); ok && signed {
		// The task's input is passed on as the signature covers it.
		if b.Input, err = jcs.Transform(b.Input); err != nil {
			return nil, malformed("body: input: %v", err)
		}
	}
	e := &Envelope{
		MessageID:   w.MessageID,
		SessionID:   w.SessionID,
		From:        w.From,
		To:          w.To,
		Body:        body,
		PayloadMode: w.PayloadMode,
		Timestamp:   w.Timestamp,
		Provenance:  w.Provenance,
		DelegateOS:  w.DelegateOS,
		raw:         bytes.Clone(data),
	}
	for _, m := range []struct {
		dst  *string
		src  *string
		name string
	}{{&e.Signature, w.Signature, "signature"}, {&e.SignatureAlgorithm, w.SignatureAlgorithm, "signature_algorithm"},
		{&e.Signer, w.Signer, "signer"}, {&e.Nonce, w.Nonce, "nonce"}} {
		if m.src == nil {
			continue
		}
		if *m.src == "" {
			return nil, malformed("member %s is empty (leave it out instead)", m.name)
		}
		*m.dst = *m.src
	}
	if err := e.check(); err != nil {
		return nil, malformed("%v", err)
	}
	return e, nil
}

// requireMembers refuses data that is not a JSON object holding every
// required member, not null.
func requireMembers(data []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return malformed("envelope is not a JSON object")
	}
	for _, name := range requiredMembers {
		if v, ok := members[name]; !ok || isNull(v) {
			return malformed("member %s is missing", name)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// bodyMembers maps each member name of any body type to the types that
// define it.
var bodyMembers = func() map[string][]MessageType {
	m := map[string][]MessageType{}
	for _, t := range []MessageType{TypeHello, TypeCapabilityManifest, TypeSessionPropose, TypeSessionAccept,
		TypeSessionReject, TypeTaskSubmit, TypeTaskUpdate, TypeTaskResult, TypeTaskFailed, TypeTaskCancel,
		TypeAttestation, TypeSessionClose} {
		rt := reflect.TypeOf(newBody(t)).Elem()
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			m[name] = append(m[name], t)
		}
	}
	return m
}()

func parseBody(raw json.RawMessage) (Body, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	var t MessageType
	if err := json.Unmarshal(members["type"], &t); err != nil || t == "" {
		return nil, fmt.Errorf("member type is missing or not a string")
	}
	b := newBody(t)
	if b == nil {
		return nil, fmt.Errorf("unknown message type %q", clip(string(t)))
	}
	// The Python SDK writes every member of its flat body model, null when
	// another type's: those are dropped, anything else is decoded strictly.
	delete(members, "type")
	for name, v := range members {
		types, known := bodyMembers[name]
		if known && isNull(v) && !containsType(types, t) {
			delete(members, name)
		}
	}
	clean, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	if err := strictjson.Unmarshal(clean, b); err != nil {
		return nil, err
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return b, nil
}

func containsType(ts []MessageType, t MessageType) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// check validates the envelope's members (not its signature).
func (e *Envelope) check() error {
	for _, f := range []struct{ name, v string }{{"message_id", e.MessageID}, {"from", e.From}, {"to", e.To}} {
		if err := checkID(f.name, f.v, true); err != nil {
			return err
		}
	}
	if err := checkID("session_id", e.SessionID, false); err != nil {
		return err
	}
	if e.Body == nil {
		return fmt.Errorf("body is missing")
	}
	if !e.PayloadMode.Known() {
		return fmt.Errorf("unknown payload_mode %q", clip(string(e.PayloadMode)))
	}
	if _, err := timestamp.Parse(e.Timestamp); err != nil {
		return err
	}
	if e.Provenance != nil {
		if err := e.Provenance.check(); err != nil {
			return fmt.Errorf("provenance: %w", err)
		}
	}
	if len(e.Signature) > MaxTextLen {
		return fmt.Errorf("signature is %d bytes, at most %d", len(e.Signature), MaxTextLen)
	}
	switch e.SignatureAlgorithm {
	case "", AlgHMACSHA256, AlgEd25519:
	default:
		return fmt.Errorf("unknown signature_algorithm %q", clip(e.SignatureAlgorithm))
	}
	if e.Signer != "" && e.SignatureAlgorithm != AlgEd25519 {
		return fmt.Errorf("signer is set but signature_algorithm is not %s", AlgEd25519)
	}
	if err := checkID("nonce", e.Nonce, false); err != nil {
		return err
	}
	if err := checkID("signer", e.Signer, false); err != nil {
		return err
	}
	if d := e.DelegateOS; d != nil {
		if t := e.Body.Type(); t != TypeSessionPropose && t != TypeTaskSubmit {
			return fmt.Errorf("a delegateos member travels only with SESSION_PROPOSE or TASK_SUBMIT, not %s", t)
		}
		if d.DCT == "" || len(d.DCT) > MaxDCTLen {
			return fmt.Errorf("delegateos.dct is empty or longer than %d bytes", MaxDCTLen)
		}
		if err := checkID("delegateos.format", d.Format, false); err != nil {
			return err
		}
	}
	return nil
}

// checkID refuses an identifier that is too long, holds a control or
// format character, invalid UTF-8 or '|' (which the reference's HMAC input
// uses as separator, so a '|' inside one field could be read as a boundary
// between two), or (when required) is empty.
func checkID(name, v string, required bool) error {
	if v == "" {
		if required {
			return fmt.Errorf("%s is empty", name)
		}
		return nil
	}
	if len(v) > MaxIDLen {
		return fmt.Errorf("%s is %d bytes, at most %d", name, len(v), MaxIDLen)
	}
	if strings.ContainsRune(v, '|') {
		return fmt.Errorf("%s %q holds '|'", name, clip(v))
	}
	return checkText(name, v, MaxIDLen)
}

// checkText refuses text that is too long or holds invalid UTF-8, control
// or format characters (which would hide what a log or terminal shows).
func checkText(name, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%s is %d bytes, at most %d", name, len(v), max)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not valid UTF-8", name)
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%s holds control character %U", name, r)
		}
	}
	return nil
}

// checkFreeText is checkText for multi-line text: tabs and newlines pass.
func checkFreeText(name, v string) error {
	return checkText(name, strings.NewReplacer("\n", " ", "\t", " ", "\r", " ").Replace(v), MaxTextLen)
}

func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func checkUnit(name string, f *float64) error {
	if f != nil && !(*f >= 0 && *f <= 1) {
		return fmt.Errorf("%s %v is outside 0.0–1.0", name, *f)
	}
	return nil
}

func oneOf(name, v string, allowed []string, required bool) error {
	if v == "" && !required {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%s %q is not one of %s", name, clip(v), strings.Join(allowed, ", "))
}

func checkRaw(name string, raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return fmt.Errorf("%s is missing", name)
	}
	return nil
}

func (b *Hello) check() error {
	if err := checkID("delegate_id", b.DelegateID, true); err != nil {
		return err
	}
	return checkModes("supported_modes", b.SupportedModes)
}

func (b *CapabilityManifest) check() error { return checkRaw("capabilities", b.Capabilities) }

func (b *SessionPropose) check() error { return b.Config.check() }

func (c *SessionConfig) check() error {
	if err := checkModes("preferred_payload_modes", c.PreferredPayloadModes); err != nil {
		return err
	}
	if c.TTLSecs != nil && (*c.TTLSecs == 0 || *c.TTLSecs > uint64(MaxTTL.Seconds())) {
		return fmt.Errorf("ttl_secs %d is outside 1–%d", *c.TTLSecs, uint64(MaxTTL.Seconds()))
	}
	if err := checkID("required_trust_domain", c.RequiredTrustDomain, false); err != nil {
		return err
	}
	if err := checkID("trust_domain", c.TrustDomain, false); err != nil {
		return err
	}
	if c.PayloadMode != "" && !c.PayloadMode.Known() {
		return fmt.Errorf("unknown payload_mode %q", clip(string(c.PayloadMode)))
	}
	return nil
}

func (b *SessionAccept) check() error {
	if err := checkID("session_id", b.SessionID, true); err != nil {
		return err
	}
	if !b.NegotiatedMode.Known() {
		return fmt.Errorf("unknown negotiated_mode %q", clip(string(b.NegotiatedMode)))
	}
	return checkModes("fallback_chain", b.FallbackChain)
}

func (b *SessionReject) check() error {
	if err := checkFreeText("reason", b.Reason); err != nil {
		return err
	}
	if b.Error != nil {
		return b.Error.check()
	}
	return nil
}

func (b *TaskSubmit) check() error {
	if err := checkID("task_id", b.TaskID, true); err != nil {
		return err
	}
	if err := checkID("skill", b.Skill, true); err != nil {
		return err
	}
	if err := checkRaw("input", b.Input); err != nil {
		return err
	}
	if b.Contract != nil {
		return b.Contract.check()
	}
	return nil
}

func (b *TaskUpdate) check() error {
	if err := checkID("task_id", b.TaskID, true); err != nil {
		return err
	}
	if err := checkUnit("progress", b.Progress); err != nil {
		return err
	}
	if b.Message != nil {
		return checkFreeText("message", *b.Message)
	}
	return nil
}

func (b *TaskResult) check() error {
	if err := checkID("task_id", b.TaskID, true); err != nil {
		return err
	}
	if err := checkRaw("output", b.Output); err != nil {
		return err
	}
	return b.Provenance.check()
}

func (b *TaskFailed) check() error {
	if err := checkID("task_id", b.TaskID, true); err != nil {
		return err
	}
	if err := b.DelegateOS.check("delegateos"); err != nil {
		return err
	}
	if b.DelegateOS != nil && (b.DelegateOS.AttestationID != "" || b.DelegateOS.Attestation != nil) {
		return fmt.Errorf("delegateos names an attestation: a failed task has none")
	}
	return b.Error.check()
}

// check refuses a delegateos member whose receipt hashes are not receipt
// digests (64 lower-case hex digits) or whose attestation ID is not an ID.
func (d *ProvenanceDOS) check(name string) error {
	if d == nil {
		return nil
	}
	if d.AttestationID != "" && !ValidTaskAttestationID(d.AttestationID) {
		return fmt.Errorf("%s.attestation_id %q is not a task attestation ID", name, clip(d.AttestationID))
	}
	if d.Attestation != nil {
		a, err := d.attestation()
		if err != nil {
			return fmt.Errorf("%s.attestation: %v", name, err)
		}
		if a.ID != d.AttestationID {
			return fmt.Errorf("%s.attestation is %s, not the attestation_id %q", name, a.ID, clip(d.AttestationID))
		}
	}
	if len(d.ReceiptHashes) > MaxListLen {
		return fmt.Errorf("%s lists more than %d receipt hashes", name, MaxListLen)
	}
	for _, h := range d.ReceiptHashes {
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return fmt.Errorf("%s.receipt_hashes holds %q, not a receipt's digest (64 lower-case hex digits)", name, clip(h))
		}
	}
	return nil
}

func (b *TaskCancel) check() error { return checkID("task_id", b.TaskID, true) }

func (b *Attestation) check() error {
	if err := checkRaw("claim", b.Claim); err != nil {
		return err
	}
	return checkRaw("evidence", b.Evidence)
}

func (b *SessionClose) check() error {
	if b.Reason != nil {
		return checkFreeText("reason", *b.Reason)
	}
	return nil
}

func (e *LdpError) check() error {
	if err := checkID("error.code", e.Code, true); err != nil {
		return err
	}
	if err := oneOf("error.category", e.Category, failureCategories, true); err != nil {
		return err
	}
	if err := oneOf("error.severity", e.Severity, severities, true); err != nil {
		return err
	}
	return checkFreeText("error.message", e.Message)
}

func (c *DelegationContract) check() error {
	if err := checkID("contract.contract_id", c.ContractID, true); err != nil {
		return err
	}
	if err := checkFreeText("contract.objective", c.Objective); err != nil {
		return err
	}
	if len(c.SuccessCriteria) > MaxListLen || len(c.Policy.SafetyConstraints) > MaxListLen {
		return fmt.Errorf("contract lists more than %d criteria or constraints", MaxListLen)
	}
	for _, s := range append(slicesClone(c.SuccessCriteria), c.Policy.SafetyConstraints...) {
		if err := checkFreeText("contract criterion", s); err != nil {
			return err
		}
	}
	if err := oneOf("contract.policy.failure_policy", c.Policy.FailurePolicy, []string{FailClosed, FailOpen}, false); err != nil {
		return err
	}
	if b := c.Policy.Budget; b != nil && b.MaxCostUSD != nil && !(*b.MaxCostUSD >= 0) {
		return fmt.Errorf("contract budget max_cost_usd %v is negative", *b.MaxCostUSD)
	}
	if c.Deadline != "" {
		if _, err := timestamp.Parse(c.Deadline); err != nil {
			return fmt.Errorf("contract deadline: %w", err)
		}
	}
	if _, err := timestamp.Parse(c.CreatedAt); err != nil {
		return fmt.Errorf("contract created_at: %w", err)
	}
	return nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func (p *Provenance) check() error {
	if err := checkID("provenance.produced_by", p.ProducedBy, true); err != nil {
		return err
	}
	if err := checkText("provenance.model_version", p.ModelVersion, MaxIDLen); err != nil || p.ModelVersion == "" {
		return fmt.Errorf("provenance.model_version is empty or invalid")
	}
	if !p.PayloadModeUsed.Known() {
		return fmt.Errorf("unknown provenance.payload_mode_used %q", clip(string(p.PayloadModeUsed)))
	}
	if err := checkUnit("provenance.confidence", p.Confidence); err != nil {
		return err
	}
	if err := checkID("provenance.session_id", p.SessionID, false); err != nil {
		return err
	}
	if p.Timestamp != "" {
		if _, err := timestamp.Parse(p.Timestamp); err != nil {
			return fmt.Errorf("provenance.timestamp: %w", err)
		}
	}
	if err := oneOf("provenance.verification_status", p.VerificationStatus, verificationStatuses, false); err != nil {
		return err
	}
	if len(p.ContractViolations) > MaxListLen || len(p.Evidence) > MaxListLen || len(p.Lineage) > MaxListLen {
		return fmt.Errorf("provenance lists more than %d entries", MaxListLen)
	}
	if p.CostUSD != nil && !(*p.CostUSD >= 0) {
		return fmt.Errorf("provenance.cost_usd %v is negative", *p.CostUSD)
	}
	return p.DelegateOS.check("provenance.delegateos")
}
