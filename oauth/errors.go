package oauth

import (
	"encoding/json"
	"net/http"
)

// OAuth error codes (RFC 6749 §4.1.2.1, §5.2; RFC 7591 §3.2.2; RFC 8707;
// RFC 9449).
const (
	ErrInvalidRequest       = "invalid_request"
	ErrInvalidClient        = "invalid_client"
	ErrInvalidGrant         = "invalid_grant"
	ErrUnauthorizedClient   = "unauthorized_client"
	ErrUnsupportedGrantType = "unsupported_grant_type"
	ErrInvalidScope         = "invalid_scope"
	ErrAccessDenied         = "access_denied"
	ErrUnsupportedResponse  = "unsupported_response_type"
	ErrServerError          = "server_error"
	ErrTemporarily          = "temporarily_unavailable"
	ErrInvalidTarget        = "invalid_target"
	ErrInvalidRedirectURI   = "invalid_redirect_uri"
	ErrInvalidClientMeta    = "invalid_client_metadata"
	ErrInvalidDPoPProof     = "invalid_dpop_proof"
	ErrInvalidToken         = "invalid_token"
)

// Error is a refusal as OAuth words it: a code and a description.
type Error struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	status      int
	dpop        bool // a resource's refusal whose challenge is DPoP's
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

func oerr(status int, code, desc string) *Error {
	return &Error{Code: code, Description: desc, status: status}
}

func badRequest(code, desc string) *Error { return oerr(http.StatusBadRequest, code, desc) }

// write answers with the error as JSON.
func (e *Error) write(w http.ResponseWriter) {
	writeJSON(w, e.status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
