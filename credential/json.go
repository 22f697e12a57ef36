package credential

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/internal/freejson"
)

// object is a JSON object as decoded: numbers kept as their literals.
type object = map[string]any

// parseObject reads untrusted bytes as one strict JSON object.
func parseObject(data []byte) (object, error) {
	if len(data) > MaxSize {
		return nil, fail("json", ErrMalformed, "%d bytes, more than %d", len(data), MaxSize)
	}
	if _, err := freejson.Canonical(data, MaxDepth); err != nil {
		return nil, fail("json", ErrMalformed, "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fail("json", ErrMalformed, "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail("json", ErrMalformed, "trailing data after the JSON value")
	}
	o, ok := v.(object)
	if !ok {
		return nil, fail("json", ErrMalformed, "the document is %s, not a JSON object", kindOf(v))
	}
	return o, nil
}

// canonical returns the RFC 8785 form of a decoded value.
func canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return jcs.Transform(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// without returns a shallow copy of o without the member name.
func without(o object, name string) object {
	c := make(object, len(o))
	for k, v := range o {
		if k != name {
			c[k] = v
		}
	}
	return c
}

// kindOf names a decoded JSON value's type for messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// stringMember returns o[name] if it is a string; present reports whether
// the member exists at all.
func stringMember(o object, check, name string) (s string, present bool, err error) {
	v, ok := o[name]
	if !ok {
		return "", false, nil
	}
	s, ok = v.(string)
	if !ok {
		return "", true, fail(check, ErrMalformed, "%s is %s, not a string", name, kindOf(v))
	}
	return s, true, nil
}

// dateTimeStamp is the lexical form of an XML Schema dateTimeStamp, to the
// second or finer, with its time zone; years of four digits.
var dateTimeStamp = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`)

// parseDateTime reads an XML Schema dateTimeStamp.
func parseDateTime(s string) (time.Time, error) {
	if len(s) > maxTimeLen || !dateTimeStamp.MatchString(s) {
		return time.Time{}, fmt.Errorf("%s is not an XML Schema dateTimeStamp such as 2026-01-02T15:04:05Z", quote(s))
	}
	if z := s[len(s)-1]; z != 'Z' {
		// XML Schema zones run from -14:00 to +14:00; time.Parse takes more.
		hh, mm := s[len(s)-5:len(s)-3], s[len(s)-2:]
		if hh > "14" || mm > "59" || hh == "14" && mm != "00" {
			return time.Time{}, fmt.Errorf("%s has a time zone outside -14:00..+14:00", quote(s))
		}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		var pe *time.ParseError
		if errors.As(err, &pe) {
			return time.Time{}, fmt.Errorf("%s is not a valid date and time: %s", quote(s), pe.Message)
		}
		return time.Time{}, fmt.Errorf("%s is not a valid date and time", quote(s))
	}
	return t, nil
}

// FormatTime writes t as a credential's dates are written here: UTC, to the
// second, YYYY-MM-DDTHH:MM:SSZ (the form AVP requires of validFrom and
// validUntil).
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
