// Command testupstream is a small MCP server over stdio for the tests of
// 'delegateos policy init'. Its tools take their arguments in ways that
// exercise the starter policy's choice of resource.
//
//	testupstream [-page-size N] [-fail MESSAGE] [-hang]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	pageSize := flag.Int("page-size", 0, "list tools this many per page (0: one page)")
	fail := flag.String("fail", "", "print this on stderr and exit 3 instead of serving")
	hang := flag.Bool("hang", false, "read requests but never answer")
	flag.Parse()
	switch {
	case *fail != "":
		fmt.Fprintln(os.Stderr, "testupstream: starting")
		fmt.Fprintln(os.Stderr, *fail)
		os.Exit(3)
	case *hang:
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	var opts []server.ServerOption
	if *pageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(*pageSize))
	}
	s := server.NewMCPServer("testupstream", "1.0.0", opts...)
	ok := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	s.AddTool(mcp.NewTool("read_file", mcp.WithDescription("Read a file.\nReturns its text."),
		mcp.WithString("path", mcp.Required()), mcp.WithReadOnlyHintAnnotation(true)), ok)
	s.AddTool(mcp.NewTool("fetch", mcp.WithDescription("Fetch a URL."),
		mcp.WithString("method"), mcp.WithString("url", mcp.Required())), ok)
	s.AddTool(mcp.NewTool("get_time", mcp.WithDescription("The time now."), mcp.WithReadOnlyHintAnnotation(true)), ok)
	s.AddTool(mcp.NewTool("count_lines", mcp.WithDescription("A file argument that is not a string."),
		mcp.WithNumber("file"), mcp.WithReadOnlyHintAnnotation(true)), ok)
	s.AddTool(mcp.NewTool("open_resource", mcp.WithString("uri"), mcp.WithString("filename")), ok)
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, "testupstream:", err)
		os.Exit(1)
	}
}
