package fanout

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// spelling is the response keys a subscriber chose for a question (its
// aliases, or the field names), level by level in the order gqlgen writes
// them: everything about its answer that canonicalQuestion leaves out. A
// group executes its first member's document; a member who spelled the
// question otherwise gets the same answer under its own keys (respell),
// renamed once per spelling and message, not executed again. Keyed by the
// aliases, each spelling was a group of its own: 1,000 anonymous
// subscriptions of one SKU under 1,000 aliases were 1,000 executions a tick
// (0.23 → 0.69 cores, goroutines 3,066 → 7,062).
type spelling struct {
	key  string // the tree, written out: equal spellings have equal keys
	tree *keyTree
}

// keyTree is one level of response keys; sub[i] is keys[i]'s selection
// (nil for a scalar).
type keyTree struct {
	keys  []string
	index map[string]int
	sub   []*keyTree
}

// selectionTree is set's fields merged by response key, as gqlgen collects
// them (first appearance first; a repeated key's selections concatenated),
// with their names written to names; ok is false for anything but fields
// without arguments or directives, or for one key naming two fields.
func selectionTree(names *strings.Builder, set ast.SelectionSet) (*keyTree, bool) {
	if len(set) == 0 {
		return nil, true
	}
	t := &keyTree{index: map[string]int{}}
	var fieldNames []string
	var sets [][]ast.Selection
	for _, s := range set {
		f, isField := s.(*ast.Field)
		if !isField || len(f.Arguments) > 0 || len(f.Directives) > 0 {
			return nil, false
		}
		if i, seen := t.index[f.Alias]; seen {
			if fieldNames[i] != f.Name {
				return nil, false
			}
			sets[i] = append(sets[i], f.SelectionSet...)
			continue
		}
		t.index[f.Alias] = len(t.keys)
		t.keys = append(t.keys, f.Alias)
		fieldNames = append(fieldNames, f.Name)
		sets = append(sets, append([]ast.Selection(nil), f.SelectionSet...))
	}
	names.WriteByte('{')
	for i, name := range fieldNames {
		names.WriteString(name)
		sub, ok := selectionTree(names, sets[i])
		if !ok {
			return nil, false
		}
		t.sub = append(t.sub, sub)
		names.WriteByte(' ')
	}
	names.WriteByte('}')
	return t, true
}

// writeKeys writes t's keys, nested, for spelling.key.
func (t *keyTree) writeKeys(b *strings.Builder) {
	if t == nil {
		return
	}
	b.WriteByte('{')
	for i, k := range t.keys {
		js, _ := json.Marshal(k)
		b.Write(js)
		t.sub[i].writeKeys(b)
		b.WriteByte(' ')
	}
	b.WriteByte('}')
}

func newSpelling(t *keyTree) *spelling {
	var b strings.Builder
	t.writeKeys(&b)
	return &spelling{key: b.String(), tree: t}
}

// renditions holds an entry's answer under other spellings than its
// group's, made on first use; an entry's copies share it.
type renditions struct {
	mu sync.Mutex
	by map[int]rendition
}

// forget drops the rendition under spelling i, which no member uses any
// more.
func (r *renditions) forget(i int) {
	r.mu.Lock()
	delete(r.by, i)
	r.mu.Unlock()
}

type rendition struct {
	resp    *graphql.Response
	payload []byte
}

// respell is e as the group's spelling i reads it (g.mu held, for reading
// at least: g.spellings).
func (e entry) respell(g *group, i int) entry {
	if i == 0 || e.alts == nil {
		return e
	}
	e.alts.mu.Lock()
	defer e.alts.mu.Unlock()
	r, ok := e.alts.by[i]
	if !ok {
		r = render(e.resp, g.spellings[0].tree, g.spellings[i].tree)
		if e.alts.by == nil {
			e.alts.by = map[int]rendition{}
		}
		e.alts.by[i] = r
	}
	e.resp, e.payload = r.resp, r.payload
	return e
}

// render is resp with from's keys renamed to to's, which name the same
// fields in the same order.
func render(resp *graphql.Response, from, to *keyTree) rendition {
	out := *resp
	if len(resp.Data) > 0 {
		var b bytes.Buffer
		dec := json.NewDecoder(bytes.NewReader(resp.Data))
		dec.UseNumber()
		if err := renameValue(dec, &b, from, to); err != nil {
			panic(err) // gqlgen's own JSON, of the tree it was executed with
		}
		out.Data = b.Bytes()
	}
	if len(resp.Errors) > 0 {
		out.Errors = make(gqlerror.List, len(resp.Errors))
		for i, e := range resp.Errors {
			c := *e
			c.Path = renamePath(e.Path, from, to)
			out.Errors[i] = &c
		}
	}
	payload, err := json.Marshal(&out)
	if err != nil {
		panic(err) // as gqlgen's transports do: a response always marshals
	}
	return rendition{resp: &out, payload: payload}
}

// renameValue copies one JSON value from dec to b, renaming the keys of an
// object (and of each object in a list) from from's to to's.
func renameValue(dec *json.Decoder, b *bytes.Buffer, from, to *keyTree) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		b.WriteByte('{')
		for n := 0; dec.More(); n++ {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			var fs, ts *keyTree
			if i, ok := from.lookup(key); ok {
				key, fs, ts = to.keys[i], from.sub[i], to.sub[i]
			}
			if n > 0 {
				b.WriteByte(',')
			}
			js, _ := json.Marshal(key)
			b.Write(js)
			b.WriteByte(':')
			if err := renameValue(dec, b, fs, ts); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		_, err = dec.Token()
		return err
	case json.Delim('['):
		b.WriteByte('[')
		for n := 0; dec.More(); n++ {
			if n > 0 {
				b.WriteByte(',')
			}
			if err := renameValue(dec, b, from, to); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		_, err = dec.Token()
		return err
	default:
		js, err := json.Marshal(tok)
		if err != nil {
			return err
		}
		b.Write(js)
		return nil
	}
}

func (t *keyTree) lookup(key string) (int, bool) {
	if t == nil {
		return 0, false
	}
	i, ok := t.index[key]
	return i, ok
}

// renamePath is an error's path under to's keys.
func renamePath(path ast.Path, from, to *keyTree) ast.Path {
	out := make(ast.Path, len(path))
	for i, el := range path {
		out[i] = el
		name, isName := el.(ast.PathName)
		if !isName {
			continue
		}
		j, ok := from.lookup(string(name))
		if !ok {
			from, to = nil, nil
			continue
		}
		out[i] = ast.PathName(to.keys[j])
		from, to = from.sub[j], to.sub[j]
	}
	return out
}
