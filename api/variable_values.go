package api

import (
	"context"
	"fmt"

	"inventory/domain"
)

// MaxVariableValues bounds the values (numbers, strings, list elements,
// object members) in one request's variables for a caller without a key
// (anonymous, a checkout token): gqlgen decodes variables into generic Go
// values at about 40-50 times their JSON's size, so a body of small list
// elements decodes to tens of times the body bound, and concurrent
// requests multiply that. A storefront's largest (availability of 500
// SKUs) has 500, a checkout's basket of 100 lines 400. Keys (the backend,
// admin imports of codes) are bounded by the body size alone.
const MaxVariableValues = 10_000

// variablesRefusal says why raw (a request's variables, JSON) is too many
// values for the caller of ctx, or "" when it is not. It counts without
// decoding: each value but the first follows a comma or opens a container.
func variablesRefusal(ctx context.Context, raw []byte) string {
	if role := domain.ActorFrom(ctx).Role; role != domain.RoleAnonymous && role != domain.RoleCheckout {
		return ""
	}
	if n := jsonValues(raw, MaxVariableValues); n > MaxVariableValues {
		return fmt.Sprintf("the variables hold more than %d values (strings, numbers, list elements, object members), the most a caller without a key may send", MaxVariableValues)
	}
	return ""
}

// jsonValues counts the values in raw JSON, up to a little past limit: one
// for each value start (after '[', ',' or ':', outside strings), which
// over-counts an object's keys as values of their own.
func jsonValues(raw []byte, limit int) int {
	n, inString, escaped := 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{' || c == ',' || c == ':':
			if n++; n > limit {
				return n
			}
		}
	}
	return n
}
