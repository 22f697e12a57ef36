package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/avpsig"
)

// maxSignedBody bounds the request body sign-request reads.
const maxSignedBody = 16 << 20

var signRequestCmd = &command{
	name:    "sign-request",
	args:    "--key FILE [--method METHOD] [--data DATA] [--token TOKEN] [--header NAME] [--json] URL",
	summary: "sign an HTTP request with AVP-Sig v2 and print its headers (holder-of-key tokens)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the key file of the token's holder (its current delegatee)")
		method := fs.String("method", "POST", "the request method")
		data := fs.String("data", "", "the request body exactly as it will be sent: TEXT, @FILE, or - for standard input")
		token := fs.String("token", "", "refuse to sign unless the key is this token's holder; - reads standard input, @FILE reads a file")
		header := fs.String("header", avpsig.SignatureHeader, "the header to put the signature in: delegateos serve reads "+avpsig.SignatureHeader+" (Authorization carries its bearer token); AVP servers want Authorization")
		asJSON := fs.Bool("json", false, "print the headers as a JSON object instead of header lines")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give the request URL")
			}
			u, err := url.Parse(args[0])
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return usagef("%q is not an http or https URL", args[0])
			}
			if *method == "" || strings.ToUpper(*method) != *method {
				return usagef("--method must be an upper-case HTTP method, as sent")
			}
			if !validHeaderName(*header) || strings.EqualFold(*header, avpsig.CoveredHeader) {
				return usagef("--header %q is not a header name for the signature", *header)
			}
			if *data == "-" && *token == "-" {
				return usagef("--data and --token cannot both read standard input")
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			if *token != "" {
				tok, err := parseToken(e, *token)
				if err != nil {
					return err
				}
				if tok.Delegatee() != k.ID() {
					return checkError{fmt.Sprintf("refused: the token's holder is %s, not this key (%s); a verifier would refuse the signature", tok.Delegatee(), k.ID())}
				}
			}
			body, err := readBody(e, *data)
			if err != nil {
				return err
			}
			path := u.EscapedPath()
			if path == "" {
				path = "/"
			}
			s, err := avpsig.Sign(k.PrivateKey(), *method, path, u.RawQuery, body, time.Now(), nil)
			if err != nil {
				return inputError{err}
			}
			if *asJSON {
				return writeJSON(e, map[string]string{*header: s.Signature, avpsig.CoveredHeader: s.Covered})
			}
			fmt.Fprintf(e.stdout, "%s: %s\n%s: %s\n", *header, s.Signature, avpsig.CoveredHeader, s.Covered)
			return nil
		}
	},
}

// readBody reads --data: TEXT, @FILE or - (standard input), byte for byte.
func readBody(e *env, arg string) ([]byte, error) {
	var r io.Reader
	switch {
	case arg == "-":
		r = e.stdin
	case strings.HasPrefix(arg, "@"):
		f, err := os.Open(arg[1:])
		if err != nil {
			return nil, inputf("read --data: %v", err)
		}
		defer f.Close()
		r = f
	default:
		return []byte(arg), nil
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSignedBody+1))
	if err != nil {
		return nil, inputf("read --data: %v", err)
	}
	if len(b) > maxSignedBody {
		return nil, inputf("the body is over %d bytes", maxSignedBody)
	}
	return b, nil
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
