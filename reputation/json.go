package reputation

import (
	"encoding/json"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// jsonTime writes a time as this package stores it; zero is omitted.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return timestamp.Format(t)
}

// MarshalJSON writes an unknown score as {"name": …, "known": false},
// with no number: unknown is not 0.
func (v View) MarshalJSON() ([]byte, error) {
	if !v.Known {
		return json.Marshal(struct {
			Name  string `json:"name"`
			Known bool   `json:"known"`
		}{v.Name, false})
	}
	type plain View
	return json.Marshal(struct {
		plain
		LastSignal string `json:"lastSignal"`
	}{plain(v), jsonTime(v.LastSignal)})
}

// MarshalJSON writes an unknown agent with no numbers.
func (v TrustView) MarshalJSON() ([]byte, error) {
	if !v.Known {
		return json.Marshal(struct {
			Agent         string   `json:"agent"`
			Known         bool     `json:"known"`
			PeerAttesters []string `json:"peerAttesters,omitempty"`
		}{v.Agent, false, v.PeerAttesters})
	}
	type plain TrustView
	return json.Marshal(struct {
		plain
		LastSignal string `json:"lastSignal"`
	}{plain(v), jsonTime(v.LastSignal)})
}

// MarshalJSON writes the signal with its timestamp as stored.
func (s Signal) MarshalJSON() ([]byte, error) {
	type plain Signal
	return json.Marshal(struct {
		plain
		Timestamp string `json:"timestamp"`
	}{plain(s), jsonTime(s.Timestamp)})
}

// MarshalJSON writes the contract with the field names of RDP §5.2 (and
// the link under "delegateos").
func (c *Contract) MarshalJSON() ([]byte, error) {
	type task struct {
		Description  string `json:"description"`
		OutputFormat string `json:"outputFormat,omitempty"`
		OutputSlug   string `json:"outputSlug,omitempty"`
		Domain       string `json:"domain,omitempty"`
	}
	type scope struct {
		Include []string `json:"include,omitempty"`
		Exclude []string `json:"exclude,omitempty"`
	}
	type constraints struct {
		RequireCitations    *bool    `json:"requireCitations,omitempty"`
		ConfidenceThreshold *float64 `json:"confidenceThreshold,omitempty"`
	}
	type evaluation struct {
		Criteria map[string]float64 `json:"criteria"`
		Result   map[string]float64 `json:"result"`
	}
	type link struct {
		DelegationID   string             `json:"delegationId"`
		TaskContractID string             `json:"taskContractId,omitempty"`
		Measured       map[string]float64 `json:"measured,omitempty"`
	}
	out := struct {
		ID           string       `json:"id"`
		Status       Status       `json:"status"`
		Delegator    string       `json:"delegator"`
		Delegate     string       `json:"delegate"`
		DelegateSlug string       `json:"delegateSlug"`
		Created      string       `json:"created"`
		Deadline     string       `json:"deadline,omitempty"`
		Task         task         `json:"task"`
		Scope        *scope       `json:"scope,omitempty"`
		Constraints  *constraints `json:"constraints,omitempty"`
		Evaluation   evaluation   `json:"evaluation"`
		Link         *link        `json:"delegateos,omitempty"`
	}{
		ID: c.ID(), Status: c.Status, Delegator: c.Delegator, Delegate: c.Delegate, DelegateSlug: c.DelegateSlug,
		Created: jsonTime(c.Created), Deadline: jsonTime(c.Deadline),
		Task:       task(c.Task),
		Evaluation: evaluation{Criteria: c.Criteria, Result: c.Result},
	}
	if c.Scope != nil {
		out.Scope = &scope{Include: c.Scope.Include, Exclude: c.Scope.Exclude}
	}
	if c.Constraints != nil {
		out.Constraints = &constraints{RequireCitations: c.Constraints.RequireCitations, ConfidenceThreshold: c.Constraints.ConfidenceThreshold}
	}
	if c.Link != nil {
		out.Link = &link{DelegationID: c.Link.DelegationID, TaskContractID: c.Link.TaskContractID, Measured: c.Link.Measured}
	}
	return json.Marshal(out)
}
