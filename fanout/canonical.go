package fanout

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// canonicalQuestion is a latest field's question in canonical words: its
// name, its selection's field names (merged as gqlgen merges them), and its
// arguments with every list of strings sorted and deduplicated (a set of
// SKUs or locations); sp is the response keys the subscriber chose
// (spelling). Subscribers who ask the same thing in other words — SKUs in
// another order or twice, the list inline or in a variable, other aliases,
// a field asked twice, the document spaced otherwise — then share one
// group, and so one read and one execution a tick; keyed by the raw
// document and variables, each spelling was a group of its own. ok is false
// for anything whose answer could differ by more than that (directives,
// fragments, arguments below the root field): those keep the raw key.
func canonicalQuestion(field *ast.Field, vars map[string]any) (question string, sp *spelling, ok bool) {
	if len(field.Directives) > 0 {
		return "", nil, false
	}
	var b strings.Builder
	b.WriteString(field.Name)
	sub, ok := selectionTree(&b, field.SelectionSet)
	if !ok {
		return "", nil, false
	}
	args := field.ArgumentMap(vars)
	for name, v := range args {
		if list, isList := v.([]any); isList {
			args[name] = stringSet(list)
		}
	}
	js, err := json.Marshal(args) // map keys sorted
	if err != nil {
		return "", nil, false
	}
	b.Write(js)
	root := &keyTree{keys: []string{field.Alias}, index: map[string]int{field.Alias: 0}, sub: []*keyTree{sub}}
	return b.String(), newSpelling(root), true
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
