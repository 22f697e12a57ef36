package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/ldp/initiator"
	"github.com/delegateos/delegateos/reputation"
)

var ldpSubmitCmd = &command{
	name: "submit",
	args: "--key FILE --token TOKEN --skill S --input JSON [--text TEXT] [--cap NS:ACTION:RESOURCE...]\n" +
		"                    [--budget N] [--ttl D] [--trust-domain NAME] [--id DELEGATE_ID] [--timeout D]\n" +
		"                    [--record [--score S] [--source DID] [--workspace DIR]] [--json] URL",
	summary: "hand a task to an LDP delegate: HELLO, SESSION_PROPOSE, TASK_SUBMIT with the token narrowed to the task, the result checked (exit 1 if the task failed)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "this initiator's key file: the token's current delegatee, which signs every envelope (Ed25519 profile)")
		token := fs.String("token", "", "the token the task runs under; - reads standard input, @FILE reads a file")
		skill := fs.String("skill", "", "the skill to invoke (a capability on the delegate's card)")
		input := fs.String("input", "", "the task's input, JSON: a semantic frame {task_type, instruction, ...} is sent as one when the session negotiated frames")
		text := fs.String("text", "", "the input in text mode, if the frame fails validation (default: the frame's instruction)")
		caps := fs.StringArray("cap", nil, "narrow the token to these capabilities (default: the card's delegateos.capability.SKILL)")
		budget := fs.Int64("budget", 0, "narrow the token's budget to N microcents (default: keep the token's)")
		ttl := fs.Duration("ttl", 10*time.Minute, "the narrowed token expires this long from now (or with the token, if sooner)")
		domain := fs.String("trust-domain", "", "this initiator's trust domain, sent in SESSION_PROPOSE")
		id := fs.String("id", "", "this initiator's delegate ID (default: ldp:delegate:<its principal ID>)")
		timeout := fs.Duration("timeout", 60*time.Second, "how long the whole exchange may take")
		record := fs.Bool("record", false, "record the outcome as an RDP signal for the delegate in the skill's domain: --score for a result (a delegate's own verified: true is its claim, not recorded), 0.0 for a task the delegate failed")
		score := fs.String("score", "", "with --record, your evaluation of the result, 0.0 to 1.0")
		src := fs.String("source", "", "with --record, the observer's DID (default: the did in the workspace's IDENTITY.md)")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print the reply envelope and what was recorded as JSON")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give one delegate URL")
			}
			if *skill == "" || *input == "" {
				return usagef("--skill and --input are required")
			}
			if *ttl <= 0 || *timeout <= 0 || *budget < 0 {
				return usagef("--ttl and --timeout must be positive and --budget not negative")
			}
			var in json.RawMessage
			if err := json.Unmarshal([]byte(*input), &in); err != nil {
				return usagef("--input is not JSON: %v", err)
			}
			var sc *float64
			if *score != "" {
				f, err := strconv.ParseFloat(*score, 64)
				if err != nil || f < 0 || f > 1 {
					return usagef("--score must be a number from 0.0 to 1.0")
				}
				sc = &f
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			parent, err := parseToken(e, *token)
			if err != nil {
				return err
			}
			var w *reputation.Workspace
			observer := *src
			if *record {
				if w, err = openWorkspace(*dir); err != nil {
					return err
				}
				if observer, err = source(w, observer); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			client := &ldp.Client{ID: *id, TrustDomain: *domain, Key: k.PrivateKey(), Verifier: &ldp.Verifier{}}
			if client.ID == "" {
				client.ID = ldp.DelegateIDPrefix + k.ID()
			}
			card, err := client.Discover(ctx, args[0])
			if err != nil {
				return checkError{fmt.Sprintf("the delegate's identity card: %v", err)}
			}
			did := card.Metadata[ldp.MetaDID]
			if _, err := identity.PublicKeyFromDID(did); err != nil {
				return checkError{fmt.Sprintf("%s's card names no valid did:key (metadata %s), so its replies could not be held to a key", card.DelegateID, ldp.MetaDID)}
			}
			if card.Capability(*skill) == nil {
				return checkError{fmt.Sprintf("%s has no skill %q", card.DelegateID, *skill)}
			}
			capList, err := parseCaps(*caps)
			if err != nil {
				return err
			}
			narrowed, delegation, err := initiator.NarrowToken(parent, k, card, *skill, capList, *budget, *ttl)
			switch {
			case errors.Is(err, initiator.ErrNoCapability):
				return fixf("%v: give --cap NS:ACTION:RESOURCE", err)
			case err != nil:
				return inputError{err}
			}
			member := &ldp.DelegateOSMember{DCT: narrowed.String(), Format: ldp.TokenFormat}
			s, err := client.Open(ctx, args[0], card.DelegateID, ldp.SessionConfig{}, member, "", did)
			if err != nil {
				return checkError{fmt.Sprintf("opening a session with %s: %v", card.DelegateID, err)}
			}
			defer s.Close(context.Background(), "done")
			taskID := "task-" + newDelegationID()[4:]
			sub := &ldp.TaskSubmit{TaskID: taskID, Skill: *skill, Input: in}
			mode := ldp.PayloadMode("")
			if in[0] != '{' {
				mode = ldp.ModeText // not a frame: text from the start
			}
			reply, err := s.Submit(ctx, sub, mode, member, nil)
			if err != nil {
				return checkError{fmt.Sprintf("TASK_SUBMIT to %s: %v", card.DelegateID, err)}
			}
			if f, ok := reply.Body.(*ldp.TaskFailed); ok && f.Error.Code == ldp.CodeFrameInvalid && s.Payload.Mode == ldp.ModeText {
				// §4.3: the delegate fell back; the task goes again in text.
				sub.Input = initiator.TextInput(in, *text)
				if reply, err = s.Submit(ctx, sub, ldp.ModeText, member, nil); err != nil {
					return checkError{fmt.Sprintf("TASK_SUBMIT to %s in text: %v", card.DelegateID, err)}
				}
			}
			out := submitReport{Delegate: card.DelegateID, DID: did, Delegation: delegation, Reply: reply}
			if *record {
				// What this exchange shows, against which the delegate's
				// refusal is read: its card, the session it had just
				// accepted, the envelope signed now by the narrowed token's
				// holder (no bearer), the capabilities that token grants.
				x := &ldp.Exchange{Card: card, Skill: *skill, LiveSession: true, SignedFresh: true, Grants: initiator.Grants(narrowed)}
				out.Recorded, out.NotRecorded, err = initiator.RecordOutcome(w, observer, did, card.DelegateID, *skill, taskID, reply, sc, x)
				switch {
				case errors.Is(err, initiator.ErrSelfRating):
					return fixf("%v", err)
				case err != nil:
					return inputError{err}
				}
			}
			if *asJSON {
				if err := writeJSON(e, out); err != nil {
					return err
				}
			} else {
				writeSubmit(e.stdout, out)
			}
			if f, ok := reply.Body.(*ldp.TaskFailed); ok {
				return checkError{fmt.Sprintf("%s: %s", f.Error.Code, f.Error.Message)}
			}
			return nil
		}
	},
}

type submitReport struct {
	Delegate    string             `json:"delegate"`
	DID         string             `json:"did"`
	Delegation  string             `json:"delegation"`
	Reply       *ldp.Envelope      `json:"reply"`
	Recorded    *reputation.Signal `json:"recorded,omitempty"`
	NotRecorded string             `json:"not_recorded,omitempty"`
}

func writeSubmit(w io.Writer, r submitReport) {
	switch b := r.Reply.Body.(type) {
	case *ldp.TaskResult:
		p := b.Provenance
		fmt.Fprintf(w, "%s\n", b.Output)
		fmt.Fprintf(w, "produced by %s (%s, signed by %s) in %s, session %s\n", p.ProducedBy, p.ModelVersion, r.Reply.Signer, p.PayloadModeUsed, p.SessionID)
		verified := "not verified"
		if p.Verified {
			verified = "verified (" + p.VerificationStatus + ")"
		}
		fmt.Fprintf(w, "result %s", verified)
		if p.Confidence != nil {
			fmt.Fprintf(w, ", self-reported confidence %.2f", *p.Confidence)
		}
		fmt.Fprintln(w)
		if d := p.DelegateOS; d != nil {
			if d.CostChargedMicrocents != nil {
				fmt.Fprintf(w, "cost charged: %d microcents\n", *d.CostChargedMicrocents)
			}
			for _, h := range d.ReceiptHashes {
				fmt.Fprintf(w, "receipt: %s\n", h)
			}
			if d.AttestationID != "" {
				fmt.Fprintf(w, "attestation: %s (signed by %s; checked against the request, output, cost and receipts)\n", d.AttestationID, r.Reply.Signer)
			}
		}
	case *ldp.TaskFailed:
		fmt.Fprintf(w, "task failed: %s (%s): %s\n", b.Error.Code, b.Error.Category, oneLine(b.Error.Message))
		if b.DelegateOS != nil {
			for _, h := range b.DelegateOS.ReceiptHashes {
				fmt.Fprintf(w, "receipt: %s\n", h)
			}
		}
	}
	if r.Recorded != nil {
		fmt.Fprintf(w, "recorded: %s %s %.2f for %s\n", r.Recorded.Dimension, r.Recorded.Domain, r.Recorded.Score, r.DID)
	} else if r.NotRecorded != "" {
		fmt.Fprintf(w, "not recorded: %s\n", r.NotRecorded)
	}
}
