package api

import "testing"

func TestOperationWrites(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		query, name string
		want        bool
	}{
		{`{ skus { code } }`, "", false},
		{`query { skus { code } }`, "", false},
		{`mutation { reserve(input: {checkoutId: "c"}) { replayed } }`, "", true},
		{`mutation M($in: ReserveInput = {checkoutId: "query {"}) @x(a: {b: 1}) { reserve(input: $in) { replayed } }`, "", true},
		{`fragment F on Query { skus { code } } mutation M { a }`, "", true},
		{`fragment F on mutation { a } query Q { ...F }`, "", false},
		{`query Q { a } mutation M { b }`, "Q", false},
		{`query Q { a } mutation M { b }`, "M", true},
		{`query Q { a } mutation M { b }`, "", true},     // ambiguous: gqlgen refuses; counted as a write
		{`query Q { a } mutation M { b }`, "Nope", true}, // no such operation: the same
		{`# mutation\nquery { mutation: a }`, "", false}, // a comment and an alias
		{`query { a(s: "mutation { }") }`, "", false},
		{`mutation { "unterminated`, "", true},
		{`subscription { stockChanged { seq } }`, "", false},
		{`{ a } { b }`, "", false},
	} {
		if got := operationWrites(c.query, c.name); got != c.want {
			t.Errorf("operationWrites(%q, %q) = %v, want %v", c.query, c.name, got, c.want)
		}
	}
}
