package fanout

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// canonicalQuestion is a latest field's question in canonical words: its
// name, alias and selection (response keys and field names), and its
// arguments with every list of strings sorted and deduplicated (a set of
// SKUs or locations). Subscribers who ask the same thing in other words —
// SKUs in another order or twice, the list inline or in a variable, the
// document spaced otherwise — then share one group, and so one read and one
// serialization a tick; keyed by the raw document and variables, each
// spelling was a group of its own. ok is false for anything whose answer
// could differ by more than that (directives, fragments, arguments below
// the root field): those keep the raw key.
func canonicalQuestion(field *ast.Field, vars map[string]any) (string, bool) {
	if len(field.Directives) > 0 {
		return "", false
	}
	var b strings.Builder
	b.WriteString(field.Alias)
	b.WriteByte(':')
	b.WriteString(field.Name)
	if !writeSelection(&b, field.SelectionSet) {
		return "", false
	}
	args := field.ArgumentMap(vars)
	for name, v := range args {
		if list, isList := v.([]any); isList {
			args[name] = stringSet(list)
		}
	}
	js, err := json.Marshal(args) // map keys sorted
	if err != nil {
		return "", false
	}
	b.Write(js)
	return b.String(), true
}

// writeSelection writes a selection of plain fields; false for anything else.
func writeSelection(b *strings.Builder, set ast.SelectionSet) bool {
	if len(set) == 0 {
		return true
	}
	b.WriteByte('{')
	for _, s := range set {
		f, isField := s.(*ast.Field)
		if !isField || len(f.Arguments) > 0 || len(f.Directives) > 0 {
			return false
		}
		b.WriteString(f.Alias)
		b.WriteByte(':')
		b.WriteString(f.Name)
		if !writeSelection(b, f.SelectionSet) {
			return false
		}
		b.WriteByte(' ')
	}
	b.WriteByte('}')
	return true
}

// stringSet is list sorted and deduplicated if it holds only strings, else
// list as it is.
func stringSet(list []any) []any {
	strs := make([]string, 0, len(list))
	for _, v := range list {
		s, isString := v.(string)
		if !isString {
			return list
		}
		strs = append(strs, s)
	}
	strs = slices.Compact(slices.Sorted(slices.Values(strs)))
	out := make([]any, len(strs))
	for i, s := range strs {
		out[i] = s
	}
	return out
}
