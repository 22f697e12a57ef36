package main

import (
	"context"
	"errors"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// resourceScheme prefixes a document's path to make its resource URI:
// /project/notes.md is file:///project/notes.md.
const resourceScheme = "file://"

// documentTemplate is the template of every document's URI.
const documentTemplate = resourceScheme + "{+path}"

// documentTemplateName is the name the template is listed by.
const documentTemplateName = "document"

// maxListedResources bounds the documents listed as resources; every
// document can still be read through the template.
const maxListedResources = 100

// docResources offer the documents as MCP resources (each file found at
// start, and a template for any path), a prompt that puts a document in
// front of the model, and completion of the prompt's path argument. They
// let a client read documents without a tool, which is why a gate in front
// of the server must decide resources and prompts as it decides tools.
type docResources struct {
	docs  *docRoot
	paths []string // the documents found at start
}

func newDocResources(docs *docRoot) *docResources {
	r := &docResources{docs: docs}
	r.walk("/", 0)
	return r
}

// walk collects document paths under dir, a few levels deep.
func (r *docResources) walk(dir string, depth int) {
	if depth > 4 || len(r.paths) >= maxListedResources {
		return
	}
	names, err := r.docs.listDir(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		p := strings.TrimSuffix(dir, "/") + "/" + strings.TrimSuffix(n, "/")
		if strings.HasSuffix(n, "/") {
			r.walk(p, depth+1)
		} else if len(r.paths) < maxListedResources {
			r.paths = append(r.paths, p)
		}
	}
}

func (r *docResources) register(s *server.MCPServer) {
	for _, p := range r.paths {
		s.AddResource(mcp.NewResource(resourceScheme+p, p, mcp.WithMIMEType("text/plain")), r.read)
	}
	s.AddResourceTemplate(mcp.NewResourceTemplate(documentTemplate, documentTemplateName,
		mcp.WithTemplateDescription("Any document under the server's root, by path"),
		mcp.WithTemplateMIMEType("text/plain")), r.read)
	s.AddPrompt(mcp.NewPrompt("summarize",
		mcp.WithPromptDescription("Ask the model to summarize one document"),
		mcp.WithArgument("path", mcp.ArgumentDescription("The document, e.g. /project/README.md"), mcp.RequiredArgument()),
	), r.summarize)
	s.AddPrompt(mcp.NewPrompt("greeting", mcp.WithPromptDescription("A fixed greeting")), r.greeting)
}

func (r *docResources) read(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	p, ok := strings.CutPrefix(uri, resourceScheme)
	if !ok {
		return nil, errors.New("not a document URI: " + uri)
	}
	text, err := r.docs.readFile(p)
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: text}}, nil
}

func (r *docResources) summarize(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	p := req.Params.Arguments["path"]
	text, err := r.docs.readFile(p)
	if err != nil {
		return nil, err
	}
	return mcp.NewGetPromptResult("Summarize "+p, []mcp.PromptMessage{
		mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Summarize this document in one sentence:\n\n"+text)),
	}), nil
}

func (r *docResources) greeting(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return mcp.NewGetPromptResult("A greeting", []mcp.PromptMessage{
		mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Hello from the docserver.")),
	}), nil
}

// CompletePromptArgument completes summarize's path from the documents
// found at start.
func (r *docResources) CompletePromptArgument(_ context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	var values []string
	if prompt == "summarize" && arg.Name == "path" {
		for _, p := range r.paths {
			if strings.HasPrefix(p, arg.Value) {
				values = append(values, p)
			}
		}
	}
	return &mcp.Completion{Values: values, Total: len(values)}, nil
}

// CompleteResourceArgument completes the document template's path the
// same way, and nothing for any other URI: a client may name any template
// in its request, and a gate decides by the one it names.
func (r *docResources) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, c mcp.CompleteContext) (*mcp.Completion, error) {
	if uri != documentTemplate || arg.Name != "path" {
		return &mcp.Completion{Values: []string{}}, nil
	}
	return r.CompletePromptArgument(ctx, "summarize", mcp.CompleteArgument{Name: "path", Value: arg.Value}, c)
}
