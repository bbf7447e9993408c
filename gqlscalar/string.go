// Package gqlscalar holds the server's GraphQL scalar coercions where they
// must be stricter than gqlgen's defaults. gqlgen.yml maps the scalars here.
package gqlscalar

import (
	"encoding/json"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalString writes a String as gqlgen does.
func MarshalString(s string) graphql.Marshaler { return graphql.MarshalString(s) }

// UnmarshalString accepts only strings. GraphQL's input coercion for String
// refuses numbers and booleans, but gqlgen turns them into "5" or "true", so
// a variable {"skus": 5} for [String!]! silently read the SKU "5". Now it is
// an error naming the value's kind, never the value.
func UnmarshalString(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	kind := fmt.Sprintf("%T", v)
	switch v.(type) {
	case json.Number, int, int32, int64, float32, float64:
		kind = "a number"
	case bool:
		kind = "a boolean"
	}
	return "", &CoercionError{Message: "expected a String, got " + kind}
}

// CoercionError is an input value of the wrong type; it is shown to the
// client as BAD_REQUEST.
type CoercionError struct{ Message string }

func (e *CoercionError) Error() string { return e.Message }

// Extensions gives the error its code in the response.
func (e *CoercionError) Extensions() map[string]any { return map[string]any{"code": "BAD_REQUEST"} }
