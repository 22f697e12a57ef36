package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docPages are the Markdown files whose links TestDocsLinks checks.
func docPages(t *testing.T, repo string) []string {
	t.Helper()
	var pages []string
	for _, pattern := range []string{"README.md", "docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(repo, pattern))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d Markdown pages under %s", len(pages), repo)
	}
	return pages
}

var (
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// prose is a page without its fenced code blocks and code spans, and its
// headings, outside the fenced blocks.
func prose(text string) (string, []string) {
	var out strings.Builder
	var heads []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			out.WriteString("\n")
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			out.WriteString("\n")
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			heads = append(heads, m[1])
		}
		out.WriteString(codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			// A code span in a link's text stays text; one holding "](" is no link.
			return strings.NewReplacer("](", "", "[", "", "]", "").Replace(s)
		}))
		out.WriteString("\n")
	}
	return out.String(), heads
}

// slug is the anchor GitHub gives a heading: lower case, letters, digits,
// '-' and '_' kept, spaces made '-', everything else dropped.
func slug(h string) string {
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// anchors returns the anchors a Markdown page defines.
func anchors(text string) map[string]bool {
	body, heads := prose(text)
	a := map[string]bool{}
	seen := map[string]int{}
	for _, h := range heads {
		s := slug(stripLinks(h))
		if n := seen[s]; n > 0 {
			a[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			a[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(body, -1) {
		a[m[1]] = true
	}
	return a
}

var linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// stripLinks keeps a heading's link texts, as GitHub's anchors do.
func stripLinks(h string) string { return linkText.ReplaceAllString(h, "$1") }

// TestDocsLinks checks that every relative link in the README, docs/ and
// the examples' READMEs names a file or directory that exists, and every
// #anchor a heading (or <a id>) of the page it points into.
func TestDocsLinks(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(b))
		return cache[path], nil
	}
	checked := 0
	for _, page := range docPages(t, repo) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repo, page)
		body, _ := prose(string(b))
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(body, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range refLink.FindAllStringSubmatch(body, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				continue // an absolute URL
			}
			checked++
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if !strings.HasPrefix(dest, repo+string(filepath.Separator)) {
					t.Errorf("%s: link %q leaves the repository", rel, target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file or directory", rel, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", rel, target)
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", rel, target, err)
				continue
			}
			if !a[frag] {
				t.Errorf("%s: link %q: no heading of %s has the anchor #%s", rel, target, filepath.Base(dest), frag)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d relative links; are the pages parsed right?", checked)
	}
	t.Logf("checked %d relative links", checked)
}

// TestSlug pins the anchors GitHub gives headings like the docs' own.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Run as a service: `delegateos serve`":               "run-as-a-service-delegateos-serve",
		"Reputation (RDP)":                                   "reputation-rdp",
		"Holder-of-key requests, revocation distribution":    "holder-of-key-requests-revocation-distribution",
		"audit prove, verify-receipt and consistency":        "audit-prove-verify-receipt-and-consistency",
		"decision_receipt/2":                                 "decision_receipt2",
		"Several proxies on one policy: the shared embedded": "several-proxies-on-one-policy-the-shared-embedded",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
	a := anchors("# A\n\n## Costs\n\n```\n## Not a heading\n```\n\n## Costs\n")
	if !a["a"] || !a["costs"] || !a["costs-1"] || a["not-a-heading"] {
		t.Errorf("anchors = %v", a)
	}
}
