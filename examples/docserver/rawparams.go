package main

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// rawParamsMetaKey is where the echo tool finds the raw params of its call.
const rawParamsMetaKey = "docserver.local/rawParams"

// rawParamsRecorder lets the echo tool show the tools/call params exactly as
// they arrived, so a test can prove a field such as _delegateos never reached
// the server. mcp-go decodes params into a struct that drops unknown fields
// and does not give handlers the request ID, so the raw bytes are taken in the
// request-initialization hook (which sees the frame and its ID) and handed to
// the handler through the decoded request's _meta in the before-call hook
// (which sees the same ID and may modify the request).
type rawParamsRecorder struct {
	tool    string
	pending sync.Map // JSON-encoded request ID -> json.RawMessage
}

func (r *rawParamsRecorder) install(h *server.Hooks) {
	h.AddOnRequestInitialization(r.record)
	h.AddBeforeCallTool(r.attach)
	h.AddOnError(func(_ context.Context, id any, _ mcp.MCPMethod, _ any, _ error) {
		r.pending.Delete(requestKey(id))
	})
}

func (r *rawParamsRecorder) record(_ context.Context, id any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var frame struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(raw, &frame) != nil || frame.Method != string(mcp.MethodToolsCall) {
		return nil
	}
	var call struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(frame.Params, &call) != nil || call.Name != r.tool {
		return nil
	}
	r.pending.Store(requestKey(id), frame.Params)
	return nil
}

func (r *rawParamsRecorder) attach(_ context.Context, id any, req *mcp.CallToolRequest) {
	raw, ok := r.pending.LoadAndDelete(requestKey(id))
	if req.Params.Meta != nil {
		// A client must not be able to forge what the server "saw".
		delete(req.Params.Meta.AdditionalFields, rawParamsMetaKey)
	}
	if !ok {
		return
	}
	if req.Params.Meta == nil {
		req.Params.Meta = &mcp.Meta{}
	}
	req.Params.Meta.SetMetaField(rawParamsMetaKey, raw)
}

// rawParams returns what attach stored for this call, or nil.
func rawParams(req mcp.CallToolRequest) json.RawMessage {
	raw, _ := req.Params.Meta.GetMetaField(rawParamsMetaKey).(json.RawMessage)
	return raw
}

// requestKey keeps 1 and "1" apart: both are valid, distinct request IDs.
func requestKey(id any) string {
	b, _ := json.Marshal(id)
	return string(b)
}
