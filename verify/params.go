package verify

import (
	"encoding/json"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// decodeParams decodes a built-in check's params into v. Params must be a
// JSON object within decodeValue's bounds; a member written as null is
// refused (JavaScript would see null, not an absent member); duplicate,
// unknown and differently cased members are refused by strictjson.
func decodeParams(check string, params json.RawMessage, v any) error {
	if len(params) == 0 {
		return paramsErr(check, "checkParams are required")
	}
	doc, err := decodeValue(params)
	if err != nil {
		return paramsErr(check, "%v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return paramsErr(check, "checkParams must be an object, not %s", jsonType(doc))
	}
	for _, k := range sortedKeys(obj) {
		if obj[k] == nil {
			return paramsErr(check, "member %q is null", k)
		}
	}
	if err := strictjson.Unmarshal(params, v); err != nil {
		return paramsErr(check, "%v", err)
	}
	return nil
}

// fieldValue is output[field] by dot path, or the output itself when field
// is nil. A field that is given is validated first.
func fieldValue(check string, output any, field *string) (v any, found bool, err error) {
	if field == nil {
		return output, true, nil
	}
	if err := validatePath(*field); err != nil {
		return nil, false, paramsErr(check, "field: %v", err)
	}
	v, found = lookup(output, *field)
	return v, found, nil
}
