package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// docTools are the tools every docserver offers. A tool that runs and fails
// (a missing file, a path out of the root) answers with isError; only a
// malformed call is a protocol error, and mcp-go produces those itself.
type docTools struct {
	docs *docRoot
}

func (t docTools) register(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("read_file",
		mcp.WithDescription("Read a text file. Paths look absolute (/project/notes.md) and are resolved inside the server's root."),
		mcp.WithString("path", mcp.Required(), mcp.Description("File to read, e.g. /project/README.md")),
		mcp.WithReadOnlyHintAnnotation(true),
	), t.readFile)
	s.AddTool(mcp.NewTool("list_files",
		mcp.WithDescription("List a directory: one name per line, directories end in /."),
		mcp.WithString("path", mcp.Description("Directory to list; defaults to /")),
		mcp.WithReadOnlyHintAnnotation(true),
	), t.listFiles)
	s.AddTool(mcp.NewTool("write_file",
		mcp.WithDescription("Write a text file, creating missing parent directories."),
		mcp.WithString("path", mcp.Required(), mcp.Description("File to write, e.g. /project/sub/todo.md")),
		mcp.WithString("content", mcp.Required(), mcp.Description("The file's new content")),
		mcp.WithDestructiveHintAnnotation(true),
	), t.writeFile)
	s.AddTool(mcp.NewTool("search",
		mcp.WithDescription(fmt.Sprintf("Find lines containing query (ignoring case) in files under path; at most %d lines.", maxSearchMatches)),
		mcp.WithString("query", mcp.Required(), mcp.Description("Text to look for")),
		mcp.WithString("path", mcp.Description("Directory or file to search; defaults to /")),
		mcp.WithReadOnlyHintAnnotation(true),
	), t.search)
}

func (t docTools) readFile(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := req.RequireString("path")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	text, err := t.docs.readFile(p)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

func (t docTools) listFiles(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := req.GetString("path", "/")
	names, err := t.docs.listDir(p)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultStructured(
		map[string]any{"entries": names},
		strings.Join(names, "\n"),
	), nil
}

func (t docTools) writeFile(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := req.RequireString("path")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	content, err := req.RequireString("content")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	written, err := t.docs.writeFile(p, content)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("wrote %d bytes to %s", len(content), written)), nil
}

func (t docTools) search(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	query, err := req.RequireString("query")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	matches, truncated, err := t.docs.search(query, req.GetString("path", "/"))
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	var b strings.Builder
	for _, m := range matches {
		fmt.Fprintf(&b, "%s:%d: %s\n", m.Path, m.Line, m.Text)
	}
	if truncated {
		fmt.Fprintf(&b, "(stopped after %d matches)\n", maxSearchMatches)
	}
	if matches == nil {
		matches = []match{}
	}
	return mcp.NewToolResultStructured(
		map[string]any{"matches": matches, "truncated": truncated},
		b.String(),
	), nil
}
