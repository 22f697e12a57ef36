package proxy

import (
	"encoding/json"
	"errors"
	"strings"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/gate"
)

// delegationMethodPrefix is the proxy's own namespace: every method in it
// is answered by the proxy and never forwarded upstream.
const delegationMethodPrefix = "delegateos/"

const codeMethodNotFound = -32601

// sessionToken is the DCT a call without its own uses: the token of the
// delegation the client delegated with delegateos/delegate, if any, else
// the token the proxy was started with.
func (s *session) sessionToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound != nil {
		return s.bound.Token
	}
	return s.cfg.SessionToken
}

// proven reports whether tok is the token the session was opened with
// (Config.SessionToken, which the transport took from its holder), not
// one a message carried (see Gate.Accept).
func (s *session) proven(tok string) bool {
	return tok != "" && tok == s.cfg.SessionToken
}

// delegationMessage answers a delegateos/* message from the client. id is
// nil for a notification (§9.4 shows delegateos/complete without one),
// which is handled the same way and not answered.
func (s *session) delegationMessage(method string, id, params []byte) {
	id = clone(id)
	params = clone(params)
	reply := func(result any, err error) {
		var me *gate.MessageError
		switch {
		case err != nil && errors.As(err, &me):
			fields := []zap.Field{zap.String("method", method), zap.String("reason", me.Message)}
			if me.Detail != "" {
				fields = append(fields, zap.String("detail", me.Detail))
			}
			s.log.Warn("delegation message refused", fields...)
			if id != nil {
				s.replyError(s.toClient, id, me.Code, me.Message, nil)
			}
		case err != nil:
			s.log.Error("delegation message failed", zap.String("method", method), zap.Error(err))
			if id != nil {
				s.replyError(s.toClient, id, codeInternalError, err.Error(), nil)
			}
		case id != nil:
			s.replyResult(id, result)
		}
	}
	d := s.cfg.Gates.Load().Delegations
	if d == nil {
		reply(nil, &gate.MessageError{Code: gate.CodeMethodNotFound, Message: method + " is not available: this proxy has no workspace (set workspace in its policy)"})
		return
	}
	if params == nil {
		params = []byte("null")
	}
	switch method {
	case gate.MethodDelegate:
		res, bind, err := d.Delegate(params)
		if err == nil {
			fields := []zap.Field{zap.Bool("accepted", res.Accepted), zap.String("delegation", res.DelegationID)}
			if !res.Accepted {
				fields = append(fields, zap.String("reason", res.Reason), zap.String("details", res.Details))
			}
			s.log.Info("delegation", fields...)
		}
		if bind != nil {
			s.mu.Lock()
			s.bound = bind
			s.mu.Unlock()
		}
		reply(res, err)
	case gate.MethodComplete:
		// Verifying an output may run a judge for a long time: the relay
		// goes on meanwhile.
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			reply(nil, &gate.MessageError{Code: gate.CodeInternalError, Message: "the proxy is shutting down"})
			return
		}
		s.background.Add(1)
		bound := s.bound
		s.mu.Unlock()
		go func() {
			defer s.background.Done()
			res, err := d.CompleteIn(s.ctx, params, bound)
			if err == nil {
				s.log.Info("delegation ended", zap.String("delegation", res.DelegationID), zap.String("status", res.Status),
					zap.String("attestation", res.AttestationID), zap.Strings("problems", res.Problems))
				s.mu.Lock()
				if s.bound != nil && s.bound.DelegationKey == res.DelegationKey {
					// The work is done: its token no longer stands for the session.
					s.bound = nil
				}
				s.mu.Unlock()
			}
			reply(res, err)
		}()
	case gate.MethodRevoke:
		res, err := d.Revoke(params)
		if err == nil {
			s.log.Info("revocation recorded", zap.String("revocation", res.RevocationID), zap.Strings("delegations", res.Delegations))
		}
		reply(res, err)
	case gate.MethodDecompose:
		res, err := d.Decompose(params, s.sessionToken())
		if err == nil {
			s.log.Info("decomposition", zap.Bool("accepted", res.Accepted), zap.String("plan", res.PlanID), zap.String("reason", res.Reason), zap.String("details", res.Details))
		}
		reply(res, err)
	default:
		reply(nil, &gate.MessageError{Code: gate.CodeMethodNotFound, Message: "method not found: " + method + " (the delegateos/ methods are delegate, complete, revoke and decompose)"})
	}
}

// replyResult answers a request with a result.
func (s *session) replyResult(id []byte, result any) {
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
	if err != nil {
		s.log.Error("encoding a response failed", zap.Error(err))
		return
	}
	s.toClient.write(append(b, '\n'))
}

// isDelegationMethod reports whether a method is in the proxy's namespace.
func isDelegationMethod(method string) bool { return strings.HasPrefix(method, delegationMethodPrefix) }
