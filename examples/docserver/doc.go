// Command docserver is a small MCP server, built with mark3labs/mcp-go, that
// serves a directory of documents over stdio. It is the upstream the
// delegateos proxy is tested and demonstrated against.
//
//	docserver --root DIR [--diagnostics] [--page-size N] [--describe NAME=TEXT]... [--rename OLD=NEW]...
//
// Tool paths look absolute ("/project/sub/notes.md") but are always resolved
// inside DIR: a path that climbs out of it, lexically or through a symbolic
// link, is refused.
//
// The document tools are read_file, list_files, write_file and search. With
// --diagnostics the server also offers tools that exercise the protocol
// features a relay must carry: echo, slow (progress and cancellation),
// sample, roots and elicit (requests to the client), big, crash, costly,
// notify_list_changed, probe (who the process runs as, and what files it
// can read anywhere: a test of the proxy's isolation, and the reason never
// to give --diagnostics outside tests) and redefine (a definition that
// changes during a session). --page-size splits tools/list into pages;
// --describe and --rename change definitions from the start, as a server
// that changed since its definitions were pinned would.
//
// stdout carries only protocol frames; logs go to stderr.
package main
