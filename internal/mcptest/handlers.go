package mcptest

import (
	"context"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Sampler is a client's LLM: it answers a sampling request whose one
// message is prompt with "answer to: " + prompt, and records the prompts.
type Sampler struct {
	mu      sync.Mutex
	prompts []string
}

// CreateMessage answers a sampling request.
func (h *Sampler) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var prompt string
	if len(req.Messages) == 1 {
		// On protocol 2026-07-28 mcp-go hands the handler content decoded as
		// a plain map; on older versions it is already typed.
		content, err := mcp.ParseSamplingContent(req.Messages[0].Content)
		if err != nil {
			return nil, err
		}
		if tc, ok := mcp.AsTextContent(content); ok {
			prompt = tc.Text
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prompts = append(h.prompts, prompt)
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("answer to: " + prompt)},
		Model:           "test-model",
		StopReason:      "endTurn",
	}, nil
}

// Seen returns the prompts asked so far.
func (h *Sampler) Seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.prompts)
}

// Roots are a client's roots, listed as they are.
type Roots []mcp.Root

// ProjectRoots is the one root file:///work/project, named project.
var ProjectRoots = Roots{{URI: "file:///work/project", Name: "project"}}

// ListRoots answers roots/list.
func (r Roots) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: slices.Clone(r)}, nil
}

// Elicitor answers elicitation requests: it accepts with
// {"answer": "yes to " + message}, or declines if Decline.
type Elicitor struct{ Decline bool }

// Elicit answers an elicitation request.
func (e Elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if e.Decline {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action:  mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"answer": "yes to " + req.Params.Message},
	}}, nil
}

// Handlers are the client options for a client that samples with sampler,
// has ProjectRoots and accepts elicitations.
func Handlers(sampler *Sampler) []client.ClientOption {
	return []client.ClientOption{
		client.WithSamplingHandler(sampler),
		client.WithRootsHandler(ProjectRoots),
		client.WithElicitationHandler(Elicitor{}),
	}
}
